#!/usr/bin/env bash
# A simulated multi-host cluster on one Linux machine, for tests and benchmarks
# (docs/simulated-cluster.md): N network namespaces behind one bridge, each link shaped with tc,
# an rsh agent that runs a command "on" a host, and a hostfile for arcrun.
#
#   sim-cluster.sh up N --rate RATE [--delay D] [--slots S] [--name NAME] [--dir DIR] [--subnet A.B.C]
#   sim-cluster.sh down [--name NAME] [--dir DIR]
#   sim-cluster.sh status [--name NAME] [--dir DIR]     (without --name: every cluster here)
#   sim-cluster.sh rsh NAME [ssh options] HOST COMMAND...  (the rsh agent; DIR/rsh-agent runs it)
#
# Cluster NAME (default arcsim; 1-10 of [a-z0-9], starting with a letter) is made of
#   hosts       namespaces NAME-h1 .. NAME-hN; inside each one `eth0` at A.B.C.i/24
#   switch      bridge NAMEbr in the root namespace at A.B.C.254/24 (mpirun's address), ports NAMEv<i>
#   links       tbf at RATE on eth0 (host -> switch) and on NAMEv<i> (switch -> host), so every
#               host sends and receives at RATE at most; netem delay D on eth0 (one way) if given
#   DIR         (default ${TMPDIR:-/tmp}/arcreduce-sim-NAME) hostfile, rsh-agent, cluster.env
# A.B.C is the first free 10.231.C (no address in it, no route but the default covering it) unless
# --subnet names one. RATE is tc's syntax with a bit unit (100mbit, 1gbit, 2.5gbit); D is tc's
# time syntax (200us, 1ms).
#
# up replaces a cluster of the same name and removes what it built if it fails; down removes
# everything of NAME (killing processes left in its hosts) and is a no-op when nothing is there.
# Exit codes: 0 done; 1 failed (and cleaned up); 2 usage; 77 this machine cannot host a cluster
# (not root, a missing tool, or a kernel without network namespaces, veth, bridge, tbf, or netem
# when --delay is given). The rsh agent exits with the command's code, or 255 (like ssh) when it
# cannot reach the host.
set -euo pipefail

script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
readonly script
readonly alias_tag=arcreduce-sim
readonly skip=77
# Open MPI options a job on the cluster needs: the TCP transport only, so that every byte between
# ranks crosses the shaped links (ranks sharing a host, with --slots > 1, talk over its loopback),
# and no DNS lookups of the host names, which no DNS server knows (with an unresponsive resolver
# mpirun waits seconds per lookup, a 4-host job about 100 s).
readonly mpi_args="--mca btl tcp,self --mca if_base_do_not_resolve 1"

die() {
  echo "sim-cluster: $*" >&2
  exit 1
}
usage() {
  echo "sim-cluster: $*" >&2
  echo "usage: sim-cluster.sh up N --rate RATE [--delay D] [--slots S] [--name NAME] [--dir DIR] [--subnet A.B.C]" >&2
  echo "       sim-cluster.sh down|status [--name NAME] [--dir DIR]" >&2
  exit 2
}
skip() {
  echo "sim-cluster: skip: $*" >&2
  exit "$skip"
}

# ---- names ------------------------------------------------------------------------------------

check_name() {
  [[ "$1" =~ ^[a-z][a-z0-9]{0,9}$ ]] ||
    usage "bad --name '$1': 1-10 of [a-z0-9], starting with a letter (it prefixes interface names)"
}
bridge_of() { echo "${1}br"; }
port_of() { echo "${1}v$2"; }
host_of() { echo "$1-h$2"; }
default_dir() { echo "${TMPDIR:-/tmp}/arcreduce-sim-$1"; }

# Namespaces of cluster $1 (hosts and the capability probe), one a line.
namespaces_of() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$1-(h[0-9]+|probe)\$" || true
}
# Links in the root namespace tagged as cluster $1's (by their alias), one a line.
links_of() {
  local path
  for path in /sys/class/net/*/ifalias; do
    [[ -r "$path" && "$(cat "$path" 2>/dev/null)" == "$alias_tag:$1" ]] || continue
    basename "$(dirname "$path")"
  done
}

# ---- up ---------------------------------------------------------------------------------------

# "1gbit" -> 1000000000 (tc's decimal bit units); empty when the text is not a rate.
rate_bps() {
  local text=${1,,}
  [[ "$text" =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$ ]] || return 0
  local -A scale=([bit]=1 [kbit]=1e3 [mbit]=1e6 [gbit]=1e9 [tbit]=1e12)
  awk -v n="${BASH_REMATCH[1]}" -v s="${scale[${BASH_REMATCH[3]}]}" \
    'BEGIN { r = n * s; if (r >= 8) printf "%.0f\n", r }'
}

require_root_and_tools() {
  ((EUID == 0)) || skip "needs root (network namespaces, veth, bridge, tc)"
  local tool
  for tool in ip tc unshare hostname flock awk; do
    command -v "$tool" >/dev/null || skip "'$tool' not found (Debian: iproute2, util-linux, hostname)"
  done
}

# Tries every kernel feature up uses inside a throw-away namespace, so that a machine without
# them is told apart (exit 77) from a failure while building the cluster (exit 1).
probe_kernel() {
  local name=$1 delay=$2 ns="$1-probe" err
  if ! err=$(ip netns add "$ns" 2>&1); then
    skip "'ip netns add' failed: $err"
  fi
  local -a steps=(
    "veth pairs|ip -n $ns link add p0 type veth peer name p1"
    "bridges|ip -n $ns link add b0 type bridge"
    "moving links into a bridge|ip -n $ns link set p1 master b0"
    "tc tbf|tc -n $ns qdisc add dev p0 root handle 1: tbf rate 1gbit burst 64kb latency 50ms"
    "UTS namespaces (unshare --uts)|ip netns exec $ns unshare --uts hostname $ns"
  )
  [[ -z "$delay" ]] ||
    steps+=("tc netem (for --delay)|tc -n $ns qdisc replace dev p1 root netem delay $delay")
  local step
  for step in "${steps[@]}"; do
    # shellcheck disable=SC2086  # the command is a fixed word list without quoting
    if ! err=$(${step#*|} 2>&1); then
      ip netns del "$ns" 2>/dev/null || true
      skip "${step%%|*} unavailable: $err"
    fi
  done
  ip netns del "$ns"
}

# First free /24 among 10.231.0-255 as "A.B.C"; the caller holds the lock.
free_subnet() {
  local c
  for c in $(seq 0 255); do
    subnet_is_free "10.231.$c" && { echo "10.231.$c"; return 0; }
  done
  return 1
}
subnet_is_free() {
  [[ -z "$(ip -4 -o addr show to "$1.0/24" 2>/dev/null)" ]] &&
    ! ip -4 route show match "$1.0/24" 2>/dev/null | grep -qv '^default'
}

# Token bucket at $bps on $dev (in namespace $ns, or the root one when empty), under netem when
# $delay is set. burst: 4 ms of line time, at least 64 KiB so that a 64 KiB GSO packet leaves in
# one piece; latency bounds the queue like a switch buffer.
shape() {
  local ns=$1 dev=$2 bps=$3 delay=$4
  local burst=$((bps / 8 / 250))
  ((burst >= 65536)) || burst=65536
  local -a tc_cmd=(tc)
  [[ -z "$ns" ]] || tc_cmd+=(-n "$ns")
  local parent=(root handle 1:)
  if [[ -n "$delay" ]]; then
    "${tc_cmd[@]}" qdisc add dev "$dev" root handle 1: netem delay "$delay" limit 100000
    parent=(parent 1:1 handle 10:)
  fi
  "${tc_cmd[@]}" qdisc add dev "$dev" "${parent[@]}" tbf rate "${bps}bit" burst "$burst" latency 50ms
}

# Whether namespace $1 reaches $2: a TCP connection to port 9 (discard) either opens or is
# refused at once when the packets get through; a firewall that drops bridged or incoming
# traffic (br_netfilter with a FORWARD policy of DROP, as Docker sets up) makes it time out.
reaches() {
  local out
  out=$(ip netns exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1) && return 0
  [[ "$out" == *refused* ]]
}

cmd_up() {
  local n="" rate="" delay="" slots=1 name=arcsim dir="" subnet=""
  while (($#)); do
    case $1 in
      --rate | --delay | --slots | --name | --dir | --subnet)
        (($# >= 2)) || usage "$1 needs a value"
        local opt=${1#--}
        printf -v "$opt" '%s' "$2"
        shift 2
        ;;
      -*) usage "unknown option '$1'" ;;
      *)
        [[ -z "$n" ]] || usage "unexpected argument '$1'"
        n=$1
        shift
        ;;
    esac
  done
  if [[ ! "$n" =~ ^[1-9][0-9]*$ ]] || ((n > 253)); then
    usage "N must be a host count in 1..253, got '$n'"
  fi
  [[ -n "$rate" ]] || usage "--rate is required (e.g. --rate 1gbit)"
  local bps
  bps=$(rate_bps "$rate")
  [[ -n "$bps" ]] || usage "bad --rate '$rate': a number with bit, kbit, mbit, gbit or tbit"
  [[ -z "$delay" || "$delay" =~ ^[0-9]+(\.[0-9]+)?(s|ms|us)$ ]] ||
    usage "bad --delay '$delay': a number with s, ms or us"
  [[ "$slots" =~ ^[1-9][0-9]*$ ]] || usage "bad --slots '$slots': a positive integer"
  check_name "$name"
  dir=${dir:-$(default_dir "$name")}
  # Open MPI splits plm_rsh_agent on spaces, so the agent's path must not contain any.
  [[ "$dir" != *[[:space:]]* ]] || usage "--dir must not contain whitespace: '$dir'"
  if [[ -n "$subnet" ]]; then
    [[ "$subnet" =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] ||
      usage "bad --subnet '$subnet': the first three octets, e.g. 10.231.7"
  fi

  require_root_and_tools
  down_cluster "$name" "$dir" quiet
  probe_kernel "$name" "$delay"

  # From here on a failure (or a signal) removes what was built.
  # shellcheck disable=SC2064  # expanded now: the handler may run outside this function
  trap "down_cluster $(printf %q "$name") $(printf %q "$dir") quiet
        echo 'sim-cluster: up failed; removed what it had built' >&2" EXIT
  trap 'exit 130' INT TERM

  local bridge
  bridge=$(bridge_of "$name")
  # Choosing a subnet and putting the bridge's address (and so its route) in place is one step
  # for concurrent ups: under a machine-wide lock.
  local lock=/run/lock
  [[ -d "$lock" && -w "$lock" ]] || lock=${TMPDIR:-/tmp}
  exec {lock_fd}>"$lock/arcreduce-sim.lock"
  flock -w 60 "$lock_fd" || die "timed out waiting for $lock/arcreduce-sim.lock"
  if [[ -n "$subnet" ]]; then
    subnet_is_free "$subnet" || die "--subnet $subnet.0/24 is in use here"
  else
    subnet=$(free_subnet) || die "no free /24 in 10.231.0.0/16"
  fi
  ip link add "$bridge" type bridge
  ip link set "$bridge" alias "$alias_tag:$name"
  ip addr add "$subnet.254/24" dev "$bridge"
  ip link set "$bridge" up
  exec {lock_fd}>&-

  local i ns port
  for ((i = 1; i <= n; i++)); do
    ns=$(host_of "$name" "$i")
    port=$(port_of "$name" "$i")
    ip netns add "$ns"
    ip link add "$port" type veth peer name "${name}p$i"
    ip link set "$port" alias "$alias_tag:$name"
    ip link set "${name}p$i" netns "$ns"
    ip -n "$ns" link set "${name}p$i" name eth0
    ip -n "$ns" addr add "$subnet.$i/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip link set "$port" master "$bridge"
    ip link set "$port" up
    shape "$ns" eth0 "$bps" "$delay"
    shape "" "$port" "$bps" ""
  done

  reaches "$(host_of "$name" 1)" "$subnet.254" ||
    skip "host 1 cannot reach the switch's address $subnet.254 (a firewall on this machine?)"
  if ((n >= 2)); then
    reaches "$(host_of "$name" 1)" "$subnet.2" ||
      skip "host 1 cannot reach host 2 through the bridge (a firewall on bridged traffic?)"
  fi

  mkdir -p "$dir"
  {
    echo "# sim-cluster $name: $n hosts at $rate${delay:+, $delay one-way delay}"
    for ((i = 1; i <= n; i++)); do echo "$(host_of "$name" "$i") slots=$slots"; done
  } >"$dir/hostfile"
  # Pins the cluster, so that Open MPI can be given one word (plm_rsh_agent) as the agent.
  printf '#!/bin/sh\nexec %q rsh %q "$@"\n' "$script" "$name" >"$dir/rsh-agent"
  chmod +x "$dir/rsh-agent"
  {
    printf '%s=%q\n' name "$name" hosts "$n" slots "$slots" rate "$rate" rate_bps "$bps" \
      delay "$delay" network "$subnet.0/24" switch_address "$subnet.254" \
      hostfile "$dir/hostfile" rsh_agent "$dir/rsh-agent" mpi_args "$mpi_args"
  } >"$dir/cluster.env"
  trap - EXIT INT TERM

  echo "sim-cluster: $name up: hosts $(host_of "$name" 1)..$(host_of "$name" "$n") on" \
    "$subnet.0/24, $rate each way per host${delay:+, $delay one-way delay}"
  echo "  arcrun -np $((n * slots)) --hostfile $dir/hostfile --rsh-agent $dir/rsh-agent" \
    "--network-interface $subnet.0/24 --mpi-args '$mpi_args' -- PROGRAM"
}

# ---- down -------------------------------------------------------------------------------------

down_cluster() {
  local name=$1 dir=$2 quiet=${3:-} found=0 ns link pids
  for ns in $(namespaces_of "$name"); do
    found=1
    # Processes left in a host (an orted whose mpirun died) would keep its network alive.
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [[ -n "$pids" ]]; then
      # shellcheck disable=SC2086
      kill $pids 2>/dev/null || true
      sleep 0.5
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      # shellcheck disable=SC2086
      [[ -z "$pids" ]] || kill -9 $pids 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || true
  done
  # Deleting a namespace deletes its veth pairs; the bridge (and ports of half-built hosts) stay.
  for link in $(links_of "$name"); do
    found=1
    ip link del "$link" 2>/dev/null || true
  done
  local file
  for file in hostfile rsh-agent cluster.env; do
    [[ -e "$dir/$file" ]] && found=1 && rm -f "$dir/$file"
  done
  [[ ! -d "$dir" ]] || rmdir "$dir" 2>/dev/null || true
  if [[ -z "$quiet" ]]; then
    ((found)) && echo "sim-cluster: $name down" || echo "sim-cluster: $name: nothing to remove"
  fi
  return 0
}

parse_name_dir() {
  name=arcsim dir="" named=0
  while (($#)); do
    case $1 in
      --name)
        (($# >= 2)) || usage "--name needs a value"
        name=$2 named=1
        shift 2
        ;;
      --dir)
        (($# >= 2)) || usage "--dir needs a value"
        dir=$2
        shift 2
        ;;
      *) usage "unknown argument '$1'" ;;
    esac
  done
  check_name "$name"
  dir=${dir:-$(default_dir "$name")}
}

cmd_down() {
  local name dir named
  parse_name_dir "$@"
  ((EUID == 0)) || skip "needs root"
  down_cluster "$name" "$dir"
}

# ---- status -----------------------------------------------------------------------------------

cmd_status() {
  local name dir named
  parse_name_dir "$@"
  if ((!named)); then
    local path found=0
    for path in /sys/class/net/*/ifalias; do
      local tag
      tag=$(cat "$path" 2>/dev/null || true)
      [[ "$tag" == "$alias_tag:"* && "$(basename "$(dirname "$path")")" == *br ]] || continue
      found=1
      echo "${tag#"$alias_tag:"}: $(namespaces_of "${tag#"$alias_tag:"}" | wc -l) hosts"
    done
    ((found)) || echo "sim-cluster: no clusters"
    return 0
  fi
  local hosts
  hosts=$(namespaces_of "$name")
  if [[ -z "$hosts" && -z "$(links_of "$name")" ]]; then
    echo "sim-cluster: $name is down"
    return 3
  fi
  [[ -r "$dir/cluster.env" ]] && sed 's/^/  /' "$dir/cluster.env"
  local ns
  while read -r ns; do
    echo "$ns: $(ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')," \
      "processes $(ip netns pids "$ns" 2>/dev/null | wc -l)," \
      "sent $(tc -n "$ns" -s qdisc show dev eth0 2>/dev/null | awk '/Sent/ {print $2; exit}') B"
  done < <(sort -V <<<"$hosts")
}

# ---- rsh agent --------------------------------------------------------------------------------

# Called like ssh: `agent [options] HOST COMMAND...`. Open MPI passes its plm_rsh_args (arcrun's
# --ssh-port gives "-p P") before the host; ssh options are accepted and ignored. The command
# words are joined with spaces and run by the login shell, as ssh does (Open MPI quotes them
# for that shell). The command runs in the host's namespace, in a UTS namespace of its own whose
# host name is HOST (gethostname, MPI_Get_processor_name), with an environment as thin as an ssh
# login's, so that only what mpirun forwards reaches the ranks.
cmd_rsh() {
  (($# >= 1)) || { echo "sim-cluster rsh: no cluster name" >&2; exit 255; }
  local name=$1
  shift
  local word letters
  while (($#)); do
    word=$1
    [[ "$word" == -?* ]] || break
    shift
    [[ "$word" != -- ]] || break
    # An option cluster such as -xp 22 or -p22: the letters in this set take an argument,
    # attached or as the next word.
    letters=${word#-}
    while [[ -n "$letters" ]]; do
      if [[ "bcDEeFIiJLlmOopQRSWw" == *"${letters:0:1}"* ]]; then
        [[ -n "${letters:1}" ]] || shift || true
        break
      fi
      letters=${letters:1}
    done
  done
  (($# >= 1)) || { echo "sim-cluster rsh: no host" >&2; exit 255; }
  local host=$1
  shift
  (($# >= 1)) || { echo "sim-cluster rsh: no command (interactive logins are not supported)" >&2; exit 255; }
  if [[ ! "$host" =~ ^$name-h[0-9]+$ ]] || ! namespaces_of "$name" | grep -qx "$host"; then
    echo "sim-cluster rsh: $host: no such host in cluster $name" >&2
    exit 255
  fi
  local -a keep=()
  local var
  for var in PATH HOME USER LOGNAME SHELL LANG LC_ALL TMPDIR LD_LIBRARY_PATH OPAL_PREFIX; do
    [[ -z "${!var+x}" ]] || keep+=("$var=${!var}")
  done
  # shellcheck disable=SC2016  # $1/$2 belong to the inner shell
  exec ip netns exec "$host" unshare --uts -- env -i "${keep[@]}" \
    /bin/sh -c 'hostname "$1" && exec "${SHELL:-/bin/sh}" -c "$2"' sh "$host" "$*"
}

# ---- main -------------------------------------------------------------------------------------

(($# >= 1)) || usage "no command"
command=$1
shift
case $command in
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  rsh) cmd_rsh "$@" ;;
  -h | --help) sed -n '2,/^set -euo/p' "$script" | sed '$d; s/^# \{0,1\}//' ;;
  *) usage "unknown command '$command'" ;;
esac
