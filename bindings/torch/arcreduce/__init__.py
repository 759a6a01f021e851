"""arcreduce: data-parallel gradient reduction. Framework bindings live in subpackages
(``arcreduce.torch``)."""
