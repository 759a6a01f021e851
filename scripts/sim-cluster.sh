#!/usr/bin/env bash
# A simulated multi-host cluster on one Linux machine, for tests and benchmarks
# (docs/design/simulated-cluster.md): N network namespaces behind one bridge, each link shaped with tc,
# an rsh agent that runs a command "on" a host, and a hostfile for arcrun.
#
#   sim-cluster.sh up N --rate RATE [--delay D] [--slots S] [--cpus C [--cpu-period P]]
#                      [--name NAME] [--dir DIR] [--subnet A.B.C]
#   sim-cluster.sh down [--name NAME] [--dir DIR]
#   sim-cluster.sh status [--name NAME] [--dir DIR]     (without --name: every cluster here)
#   sim-cluster.sh rsh [--cpu-budget] NAME [ssh options] HOST COMMAND...
#                                     (the rsh agent; DIR/rsh-agent runs it)
#
# Cluster NAME (default arcsim; 1-10 of [a-z0-9], starting with a letter) is made of
#   hosts       namespaces NAME-h1 .. NAME-hN; inside each one `eth0` at A.B.C.i/24
#   switch      bridge NAMEbr in the root namespace at A.B.C.254/24 (mpirun's address), ports NAMEv<i>
#   links       tbf at RATE on eth0 (host -> switch) and on NAMEv<i> (switch -> host), so every
#               host sends and receives at RATE at most; netem delay D on eth0 (one way) if given
#   CPU budget  with --cpus: cgroup arcreduce-sim-NAME/NAME-h<i> of each host (cgroup v1 cpu, and
#               cpuacct where mounted apart, or v2 with the cpu controller) with a CFS quota of C
#               cores (C * P us of CPU time per period of P us, default 2000); every process the
#               rsh agent starts on a host runs in its group. Without --cpus the hosts share the
#               machine's CPUs as any processes do.
#   DIR         (default ${TMPDIR:-/tmp}/arcreduce-sim-NAME) hostfile, rsh-agent, cluster.env
# A.B.C is the first free 10.231.C (no address in it, no route but the default covering it) unless
# --subnet names one. RATE is tc's syntax with a bit unit (100mbit, 1gbit, 2.5gbit); D is tc's
# time syntax (200us, 1ms). C is a number of cores above 0, fractional or not (0.25, 1.5); P is
# in us, 1000..1000000. The kernel's smallest quota is 1000 us, so a C below 0.5 raises the
# default period to 1000/C us (0.25: 4000 us); a P given with C * P below 1000 is refused.
#
# up replaces a cluster of the same name and removes what it built if it fails; down removes
# everything of NAME, cgroups included (killing processes left in its hosts and groups), and is
# a no-op when nothing is there.
# Exit codes: 0 done; 1 failed (and cleaned up); 2 usage; 77 this machine cannot host a cluster
# (not root, a missing tool, or a kernel without network namespaces, veth, bridge, tbf, netem
# when --delay is given, or usable CFS quotas when --cpus is given). The rsh agent exits with
# the command's code, or 255 (like ssh) when it cannot reach the host or, with --cpu-budget
# (which DIR/rsh-agent passes after up --cpus), cannot put the command in the host's cgroup.
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
  echo "usage: sim-cluster.sh up N --rate RATE [--delay D] [--slots S] [--cpus C [--cpu-period P]]" >&2
  echo "                          [--name NAME] [--dir DIR] [--subnet A.B.C]" >&2
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

# ---- CPU budgets (cgroups) ---------------------------------------------------------------------
#
# Cluster NAME's groups are HIER/arcreduce-sim-NAME/NAME-h<i> in each hierarchy below (and a
# throw-away NAME-probe there while up probes). They are found from NAME and the mounts alone,
# so that down, status and the rsh agent need no state.

# The kernel's smallest CFS quota per period (v1 and v2 refuse less with EINVAL).
readonly min_quota_us=1000
# Short: the scheduler refills a throttled group's quota once a period, so a host that spends its
# budget waits up to a period minus its quota before it runs again, a stall real hosts do not
# have and that holds up the collectives waiting on that host (docs/design/simulated-cluster.md, "CPU
# budgets").
readonly default_period_us=2000

# The hierarchies that give CFS quotas here, as "1 CPU_MOUNT [CPUACCT_MOUNT]" (cgroup v1: the cpu
# controller's mount and, for accounting, cpuacct's where it is mounted apart from cpu) or
# "2 MOUNT" (a cgroup v2 hierarchy whose root offers the cpu controller); nothing when neither is
# mounted. v1 first: where the v1 cpu controller is mounted, no v2 hierarchy can have it.
cpu_hierarchy() {
  local cpu acct mount
  cpu=$(v1_mount_of cpu)
  if [[ -n "$cpu" ]]; then
    acct=$(v1_mount_of cpuacct)
    [[ "$acct" != "$cpu" ]] || acct=""
    echo "1 $cpu $acct"
    return 0
  fi
  while read -r mount; do
    if grep -qw cpu "$mount/cgroup.controllers" 2>/dev/null; then
      echo "2 $mount"
      return 0
    fi
  done < <(awk '$3 == "cgroup2" {print $2}' /proc/self/mounts)
}
# Mount point of the cgroup v1 hierarchy that holds controller $1, or nothing.
v1_mount_of() {
  awk -v c="$1" '$3 == "cgroup" {
    n = split($4, opts, ",")
    for (k = 1; k <= n; k++) if (opts[k] == c) { print $2; exit }
  }' /proc/self/mounts
}
# Cluster $1's folder (arcreduce-sim-NAME) in every hierarchy mounted here, one a line, whether
# it exists or not.
cgroup_folders_of() {
  local version mounts mount
  # shellcheck disable=SC2034  # version: read to skip it
  read -r version mounts <<<"$(cpu_hierarchy)"
  for mount in $mounts; do echo "$mount/$alias_tag-$1"; done
}

# Gives cgroup $2 (hierarchy version $1) a quota of $3 us per period of $4 us.
set_quota() {
  if (($1 == 1)); then
    # The period first: the quota is checked against it.
    echo "$4" >"$2/cpu.cfs_period_us" && echo "$3" >"$2/cpu.cfs_quota_us"
  else
    echo "$3 $4" >"$2/cpu.max"
  fi
}

# Creates cluster $1's folders and in them one group per host ($4 ...) with a quota of $2 us per
# period of $3 us (in the cpu hierarchy; in a separate v1 cpuacct one, plain groups for
# accounting). On v2 the folder's cpu controller must be enabled for its children, and so the
# mount root's (the machine's root group, or a delegated one without processes of its own: v2
# lets no group with processes pass controllers down); enabling it at the root is left in place,
# as systemd does.
make_cgroups() {
  local name=$1 quota=$2 period=$3
  shift 3
  local version mounts mount folder host
  read -r version mounts <<<"$(cpu_hierarchy)"
  [[ -n "$version" ]] || return 1
  for mount in $mounts; do
    folder=$mount/$alias_tag-$name
    [[ -d "$folder" ]] || mkdir "$folder" || return 1
    if ((version == 2)); then
      enable_cpu_controller "$mount" && enable_cpu_controller "$folder" || return 1
    fi
    for host in "$@"; do
      mkdir "$folder/$host" || return 1
      # The first mount is the cpu controller's; a v1 cpuacct one only counts.
      if [[ "$mount" == "${mounts%% *}" ]]; then
        set_quota "$version" "$folder/$host" "$quota" "$period" || return 1
      fi
    done
  done
}
enable_cpu_controller() {
  grep -qw cpu "$1/cgroup.subtree_control" || echo +cpu >"$1/cgroup.subtree_control"
}

# Tries what make_cgroups does in throw-away groups, with a process moved into one, so that a
# machine without usable CFS quotas is told apart (exit 77) from a failure while building (1).
probe_cgroups() {
  local name=$1 quota=$2 period=$3 version mounts err
  read -r version mounts <<<"$(cpu_hierarchy)"
  [[ -n "$version" ]] ||
    skip "--cpus needs the cgroup v1 cpu controller or a cgroup v2 hierarchy with the cpu" \
      "controller mounted; neither is (see /proc/self/mounts)"
  local group=$name-probe
  # shellcheck disable=SC2016  # $$ and $1 belong to the inner shell
  if ! err=$(make_cgroups "$name" "$quota" "$period" "$group" 2>&1 &&
    sh -c 'echo $$ >"$1/cgroup.procs"' sh "${mounts%% *}/$alias_tag-$name/$group" 2>&1); then
    remove_cgroups "$name" >/dev/null
    local hint=" (v2 passes the cpu controller on only from the root group or from one without"
    hint+=" processes of its own)"
    ((version == 2)) || hint=""
    skip "CPU quotas unusable in ${mounts%% *} (cgroup v$version): ${err:-no message}$hint"
  fi
  remove_cgroups "$name" >/dev/null
}

# Removes cluster $1's groups (a probe's included), killing their processes first: TERM, and KILL to
# what is left after 0.5 s. Prints the folders it found.
remove_cgroups() {
  local folder group pids i
  for folder in $(cgroup_folders_of "$1"); do
    [[ -d "$folder" ]] || continue
    echo "$folder"
    for group in "$folder"/*/; do
      group=${group%/}
      [[ -d "$group" ]] || continue
      pids=$(cat "$group/cgroup.procs" 2>/dev/null || true)
      if [[ -n "$pids" ]]; then
        # shellcheck disable=SC2086
        kill $pids 2>/dev/null || true
        sleep 0.5
        pids=$(cat "$group/cgroup.procs" 2>/dev/null || true)
        # shellcheck disable=SC2086
        [[ -z "$pids" ]] || kill -9 $pids 2>/dev/null || true
      fi
      # A killed process leaves its group when it has exited, a moment after the signal.
      for ((i = 0; i < 50; i++)); do
        rmdir "$group" 2>/dev/null && break
        sleep 0.1
      done
      [[ ! -d "$group" ]] || echo "sim-cluster: could not remove cgroup $group" >&2
    done
    rmdir "$folder" 2>/dev/null || echo "sim-cluster: could not remove cgroup $folder" >&2
  done
}

# Moves the calling process (the rsh agent, before it execs the command) into host $2's groups of
# cluster $1, where that cluster has them; the command and everything it starts inherit them.
# With $3 = required the cluster is known to have CPU budgets, and not finding its groups is an
# error: the agent runs inside a host (ip netns exec mounts a fresh /sys there, without the
# cgroup mounts) when an Open MPI daemon starts others (tree spawn), which up's mpi_args turn off.
join_cgroups() {
  local name=$1 host=$2 required=${3:-} version mounts mount joined=0
  read -r version mounts <<<"$(cpu_hierarchy)"
  for mount in $mounts; do
    [[ -d "$mount/$alias_tag-$name" ]] || continue
    if ! echo "$BASHPID" >"$mount/$alias_tag-$name/$host/cgroup.procs"; then
      echo "sim-cluster rsh: cannot move into $host's cgroup $mount/$alias_tag-$name/$host" >&2
      exit 255
    fi
    joined=1
  done
  if [[ -n "$required" ]] && ((!joined)); then
    echo "sim-cluster rsh: cluster $name has CPU budgets but its cgroups are not visible here" \
      "(called from inside a host? run mpirun with --mca plm_rsh_no_tree_spawn 1)" >&2
    exit 255
  fi
}

# C cores ($1) as a quota in us per period of $2 us, rounded; empty when $1 is not a number.
quota_us() {
  [[ "$1" =~ ^([0-9]+(\.[0-9]*)?|\.[0-9]+)$ ]] || return 0
  awk -v c="$1" -v p="$2" 'BEGIN { printf "%.0f\n", c * p }'
}
# The shortest period in us in which C cores ($1, above 0) make the kernel's smallest quota.
min_period_us() {
  awk -v c="$1" -v m="$min_quota_us" \
    'BEGIN { p = m / c; printf "%d\n", (p == int(p)) ? p : int(p) + 1 }'
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
  local n="" rate="" delay="" slots=1 cpus="" cpu_period="" name=arcsim dir="" subnet=""
  while (($#)); do
    case $1 in
      --rate | --delay | --slots | --cpus | --cpu-period | --name | --dir | --subnet)
        (($# >= 2)) || usage "$1 needs a value"
        local opt=${1#--}
        printf -v "${opt//-/_}" '%s' "$2"
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
  # With --cpus: period and quota in us, the quota at least the kernel's smallest.
  local period="" quota=""
  if [[ -n "$cpus" ]]; then
    quota=$(quota_us "$cpus" 1000)
    if [[ -z "$quota" ]] || ((quota <= 0 || quota > 1024000)); then
      usage "bad --cpus '$cpus': a number of cores above 0 and at most 1024, e.g. 0.25 or 2"
    fi
    local shortest
    shortest=$(min_period_us "$cpus")
    if [[ -n "$cpu_period" ]]; then
      [[ "$cpu_period" =~ ^[0-9]{4,7}$ ]] ||
        usage "bad --cpu-period '$cpu_period': microseconds in 1000..1000000"
      period=$((10#$cpu_period))
      ((period >= 1000 && period <= 1000000)) ||
        usage "bad --cpu-period '$cpu_period': microseconds in 1000..1000000"
      ((period >= shortest)) ||
        usage "--cpus $cpus with --cpu-period $period gives a quota below the kernel's smallest" \
          "($min_quota_us us); --cpus $cpus needs a period of at least $shortest us"
    else
      period=$default_period_us
      if ((period < shortest)); then
        ((shortest <= 1000000)) ||
          usage "bad --cpus '$cpus': below the smallest budget, 0.001 cores"
        period=$shortest
        echo "sim-cluster: note: --cpus $cpus needs a period of at least $shortest us (the" \
          "kernel's smallest quota is $min_quota_us us), using it instead of" \
          "$default_period_us us" >&2
      fi
    fi
    quota=$(quota_us "$cpus" "$period")
  elif [[ -n "$cpu_period" ]]; then
    usage "--cpu-period needs --cpus"
  fi
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
  [[ -z "$cpus" ]] || probe_cgroups "$name" "$quota" "$period"

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
  local -a hosts=()
  for ((i = 1; i <= n; i++)); do hosts+=("$(host_of "$name" "$i")"); done
  [[ -z "$cpus" ]] || make_cgroups "$name" "$quota" "$period" "${hosts[@]}" ||
    die "could not create the hosts' cgroups"

  reaches "$(host_of "$name" 1)" "$subnet.254" ||
    skip "host 1 cannot reach the switch's address $subnet.254 (a firewall on this machine?)"
  if ((n >= 2)); then
    reaches "$(host_of "$name" 1)" "$subnet.2" ||
      skip "host 1 cannot reach host 2 through the bridge (a firewall on bridged traffic?)"
  fi

  # With CPU budgets every daemon is started from here: a daemon starting others (Open MPI's tree
  # spawn, above 64 hosts) runs the agent inside a host, where the cgroups are not mounted.
  local job_mpi_args=$mpi_args budget="" version="" mounts="" cgroup="" cpuacct=""
  if [[ -n "$cpus" ]]; then
    job_mpi_args+=" --mca plm_rsh_no_tree_spawn 1"
    budget="$cpus CPUs per host ($quota us per $period us)"
    read -r version mounts <<<"$(cpu_hierarchy)"
    cgroup=${mounts%% *}/$alias_tag-$name
    [[ "$mounts" != *" "* ]] || cpuacct=${mounts#* }/$alias_tag-$name
  fi

  mkdir -p "$dir"
  {
    echo "# sim-cluster $name: $n hosts at $rate${delay:+, $delay one-way delay}${budget:+, }$budget"
    for ((i = 1; i <= n; i++)); do echo "$(host_of "$name" "$i") slots=$slots"; done
  } >"$dir/hostfile"
  # Pins the cluster, so that Open MPI can be given one word (plm_rsh_agent) as the agent.
  printf '#!/bin/sh\nexec %q rsh %s%q "$@"\n' "$script" "${cpus:+--cpu-budget }" "$name" \
    >"$dir/rsh-agent"
  chmod +x "$dir/rsh-agent"
  # cpus .. cpuacct: empty without --cpus. Host H's group is $cgroup/H (cgroup v$cgroup_version);
  # its CPU time: v2 usage_usec in $cgroup/H/cpu.stat; v1 cpuacct.usage (ns) in $cpuacct/H where
  # cpuacct is mounted apart from cpu, else in $cgroup/H where it is mounted with it.
  {
    printf '%s=%q\n' name "$name" hosts "$n" slots "$slots" rate "$rate" rate_bps "$bps" \
      delay "$delay" network "$subnet.0/24" switch_address "$subnet.254" \
      hostfile "$dir/hostfile" rsh_agent "$dir/rsh-agent" mpi_args "$job_mpi_args" \
      cpus "$cpus" cpu_period_us "$period" cpu_quota_us "$quota" cgroup_version "$version" \
      cgroup "$cgroup" cpuacct "$cpuacct"
  } >"$dir/cluster.env"
  trap - EXIT INT TERM

  echo "sim-cluster: $name up: hosts $(host_of "$name" 1)..$(host_of "$name" "$n") on" \
    "$subnet.0/24, $rate each way per host${delay:+, $delay one-way delay}${budget:+, $budget}"
  echo "  arcrun -np $((n * slots)) --hostfile $dir/hostfile --rsh-agent $dir/rsh-agent" \
    "--network-interface $subnet.0/24 --mpi-args '$job_mpi_args' -- PROGRAM"
  if [[ -n "$cpus" ]] &&
    awk -v c="$cpus" -v n="$n" -v m="$(nproc)" 'BEGIN { exit !(c * n > m) }'; then
    echo "sim-cluster: note: $n hosts of $cpus CPUs exceed this machine's $(nproc);" \
      "busy hosts together get less than their budgets" >&2
  fi
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
  [[ -z "$(remove_cgroups "$name")" ]] || found=1
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
      "sent $(tc -n "$ns" -s qdisc show dev eth0 2>/dev/null | awk '/Sent/ {print $2; exit}') B," \
      "$(cpu_budget_of "$name" "$ns")"
  done < <(sort -V <<<"$hosts")
}

# Host $2's CPU budget and what it used, read from its groups: "cpu C (Q us per P us), used S s,
# throttled T of U periods", or "cpu unlimited" when cluster $1 has no budgets.
cpu_budget_of() {
  local version mounts group acct quota="" period="" used="" throttled periods
  read -r version mounts <<<"$(cpu_hierarchy)"
  group=${mounts%% *}/$alias_tag-$1/$2
  if [[ -z "$version" || ! -d "$group" ]]; then
    echo "cpu unlimited"
    return 0
  fi
  if ((version == 1)); then
    quota=$(cat "$group/cpu.cfs_quota_us" 2>/dev/null || true)
    period=$(cat "$group/cpu.cfs_period_us" 2>/dev/null || true)
    acct=$group
    [[ "$mounts" != *" "* ]] || acct=${mounts#* }/$alias_tag-$1/$2
    used=$(awk '{printf "%.2f", $1 / 1e9}' "$acct/cpuacct.usage" 2>/dev/null || true)
  else
    read -r quota period <"$group/cpu.max" || true
    used=$(awk '$1 == "usage_usec" {printf "%.2f", $2 / 1e6}' "$group/cpu.stat" 2>/dev/null || true)
  fi
  throttled=$(awk '$1 == "nr_throttled" {print $2}' "$group/cpu.stat" 2>/dev/null || true)
  periods=$(awk '$1 == "nr_periods" {print $2}' "$group/cpu.stat" 2>/dev/null || true)
  if [[ "$quota" =~ ^[0-9]+$ && "$period" =~ ^[0-9]+$ ]] && ((period > 0)); then
    echo -n "cpu $(awk -v q="$quota" -v p="$period" 'BEGIN { printf "%g", q / p }')" \
      "($quota us per $period us)"
  else
    echo -n "cpu unlimited ($quota)"
  fi
  echo ", used ${used:-?} s, throttled ${throttled:-?} of ${periods:-?} periods"
}

# ---- rsh agent --------------------------------------------------------------------------------

# Called like ssh: `agent [options] HOST COMMAND...`. Open MPI passes its plm_rsh_args (arcrun's
# --ssh-port gives "-p P") before the host; ssh options are accepted and ignored. The command
# words are joined with spaces and run by the login shell, as ssh does (Open MPI quotes them
# for that shell). The command runs in the host's namespace, in a UTS namespace of its own whose
# host name is HOST (gethostname, MPI_Get_processor_name), with an environment as thin as an ssh
# login's, so that only what mpirun forwards reaches the ranks. Where the cluster has CPU budgets
# the agent moves itself into HOST's groups first, so the command and all it starts run in them;
# --cpu-budget (DIR/rsh-agent passes it when up was given --cpus) makes groups it cannot find an
# error (255) instead of a command run without a budget.
cmd_rsh() {
  local budget=""
  [[ "${1:-}" != --cpu-budget ]] || { budget=required; shift; }
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
  join_cgroups "$name" "$host" "$budget"
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
