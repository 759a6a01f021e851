#include "tensor_view.h"

#include <pybind11/pybind11.h>

#include <sstream>

namespace arcreduce_torch {
namespace {

namespace py = pybind11;

bool to_dtype(c10::ScalarType type, arcreduce::DType* out) {
  using arcreduce::DType;
  switch (type) {
    case c10::ScalarType::Float:
      *out = DType::kFloat32;
      return true;
    case c10::ScalarType::Double:
      *out = DType::kFloat64;
      return true;
    case c10::ScalarType::Half:
      *out = DType::kFloat16;
      return true;
    case c10::ScalarType::BFloat16:
      *out = DType::kBFloat16;
      return true;
    case c10::ScalarType::Byte:
      *out = DType::kUInt8;
      return true;
    case c10::ScalarType::Char:
      *out = DType::kInt8;
      return true;
    case c10::ScalarType::Short:
      *out = DType::kInt16;
      return true;
    case c10::ScalarType::Int:
      *out = DType::kInt32;
      return true;
    case c10::ScalarType::Long:
      *out = DType::kInt64;
      return true;
    case c10::ScalarType::Bool:
      *out = DType::kBool;
      return true;
    default:
      return false;
  }
}

// Python's spelling (torch.int32), which c10::toString does not use ("Int").
std::string torch_dtype_name(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return "torch.float32";
    case c10::ScalarType::Double:
      return "torch.float64";
    case c10::ScalarType::Half:
      return "torch.float16";
    case c10::ScalarType::BFloat16:
      return "torch.bfloat16";
    case c10::ScalarType::Byte:
      return "torch.uint8";
    case c10::ScalarType::Char:
      return "torch.int8";
    case c10::ScalarType::Short:
      return "torch.int16";
    case c10::ScalarType::Int:
      return "torch.int32";
    case c10::ScalarType::Long:
      return "torch.int64";
    case c10::ScalarType::Bool:
      return "torch.bool";
    case c10::ScalarType::ComplexHalf:
      return "torch.complex32";
    case c10::ScalarType::ComplexFloat:
      return "torch.complex64";
    case c10::ScalarType::ComplexDouble:
      return "torch.complex128";
    default:
      return std::string("torch.") + c10::toString(type);
  }
}

}  // namespace

arcreduce::Tensor view_of(const at::Tensor& tensor, const std::string& name, Use use) {
  const std::string who = "tensor '" + name + "'";
  if (!tensor.defined()) throw py::value_error(who + " is undefined");
  if (tensor.layout() != c10::kStrided) {
    std::ostringstream os;
    os << who << " has layout " << tensor.layout()
       << "; only dense (strided) tensors are supported";
    throw py::type_error(os.str());
  }
  arcreduce::DType dtype;
  const bool known = to_dtype(tensor.scalar_type(), &dtype);
  if (!known) {
    // Which op each dtype takes is the runtime's rule (Runtime::check_allreduce).
    throw py::type_error(who + " has dtype " + torch_dtype_name(tensor.scalar_type()) +
                         (use == Use::kAllreduce ? ", which allreduce" : ", which broadcast") +
                         " does not support (floating-point, integer and bool dtypes only: not "
                         "complex or quantized)");
  }
  if (!tensor.is_cpu()) {
    std::ostringstream os;
    os << who << " is on device " << tensor.device()
       << "; this build of arcreduce.torch reduces CPU tensors only";
    throw py::value_error(os.str());
  }
  if (!tensor.is_contiguous()) {
    std::ostringstream os;
    os << who << " is not contiguous (sizes " << tensor.sizes() << ", strides " << tensor.strides()
       << "); arcreduce works in place on contiguous memory: pass tensor.contiguous() and use "
          "the returned tensor";
    throw py::value_error(os.str());
  }
  if (tensor.is_neg() || tensor.is_conj()) {
    throw py::value_error(who + " has a lazy negation or conjugation bit; call resolve_neg() / " +
                          "resolve_conj() first");
  }
  arcreduce::Tensor view;
  view.data = tensor.numel() > 0 ? tensor.data_ptr() : nullptr;
  view.dtype = dtype;
  view.shape.assign(tensor.sizes().begin(), tensor.sizes().end());
  return view;
}

}  // namespace arcreduce_torch
