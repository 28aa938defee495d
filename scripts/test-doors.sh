#!/bin/bash
# shellcheck disable=SC2016,SC2317
# (SC2016: the single-quoted 'sh -c' and python programs expand their own variables;
#  SC2317: the check_* functions are called indirectly, through run_check)
#
# scripts/test-doors.sh - side doors I (GitHub issue 14): the user's own
# daemons and passed or inherited descriptors must not read a listed file for
# a sandboxed task, and the real system must keep working inside.
#
# Run as root in a throwaway guest where the package is installed and the
# daemon runs (the QEMU guest of `make vm-test`). It makes a test user with a
# systemd user manager (loginctl enable-linger) and a secret with known
# content listed in the user's ~/.config/agent-sandbox-exec/denylist; each
# door check tries, from inside `agent-sandbox-exec`, to get the secret read
# by something else, and first shows (outside, as a control) that the same
# way does read it there.
#
# Checks (in this order; names for ASX_DOORS_ONLY / ASX_DOORS_SKIP):
#   systemd_run        systemd-run --user --pipe --wait cat SECRET (the user manager runs it)
#   busctl_transient   StartTransientUnit over the session bus with busctl --user
#   tmux_outside       tmux new-window to a tmux server started outside
#   stream_outside     connect to a same-uid listener made outside: path and abstract
#                      stream, seqpacket, and a datagram to a same-uid socket made outside
#   scm_rights         an outside process sends an open descriptor of SECRET (SCM_RIGHTS)
#                      to a socket the sandboxed task listens on
#   inherited_fd       a descriptor of SECRET inherited by the launcher (fd 3, stdin):
#                      the launch is refused (exit 2, naming the descriptor)
#   inherited_fd_chmod the same after SECRET was made unreadable (chmod 000 from inside) while
#                      an outside shell held fd 3 on it: still refused (the descriptor's key
#                      decides, not whether the user may open the file now)
#   other_uid          sockets of other uids stay reachable: getent passwd, logger
#                      (journal), busctl --system, the daemon's own socket (a nested launch)
#   tmux_inside        a tmux server started inside the sandbox works from inside
#   ssh_agent          ssh-add -l: refused without a list line; with `socket $SSH_AUTH_SOCK`
#                      in the list, works after an outside launch; a launch from inside
#                      adds no allow (and says so)
#   sock_reused        an allowed socket (on an ext4 image, which reuses a freed inode number at
#                      once) goes away; another outside listener's socket gets its inode number:
#                      a sandbox that was allowed the first one may not connect to the second
#   planted_agents     the agent removes the user's ssh-agent socket (and git's credential-cache
#                      socket, and a gpg-agent one) and binds its own listener there: the user's
#                      outside ssh-add, git credential-cache store and a client at
#                      ~/.gnupg/S.gpg-agent reach nothing and hand it no key, password or data
#   loopback_tcp       the user's TCP server made outside on 127.0.0.1, ::1 and :: (dual stack),
#                      asked at 127.0.0.1, 127.0.0.2, 0.0.0.0, ::1, ::ffff:127.0.0.1 and ::, as each
#                      server's address lets it answer: refused
#                      inside (EPERM), served outside; root's server served inside
#   loopback_udp       the user's UDP echo server made outside: sendto and connect+send refused
#                      inside, answered outside
#   loopback_mptcp     the user's MPTCP listener made outside: MPTCP and plain TCP refused inside
#   loopback_own       TCP and UDP servers the agent starts inside: reachable from inside and
#                      from the user's processes outside
#   loopback_allow     `socket tcp:PORT` / `socket udp:PORT` lines: applied by a launch from
#                      outside (served inside), not by one from inside (refused, and it says so)
#   loopback_remote    a network namespace behind a veth pair stands for a remote host: the
#                      user's server there is reached from inside although the user also has a
#                      wildcard server on the same port here; the host's own new veth address
#                      (learnt from rtnetlink) is refused like loopback
#   root_groups        the user added to a group that is root by another name (docker): a launch,
#                      --status and the doctor (agent-sandbox-execd --check) warn, naming it
#   tools              python3, git clone of a local repository, an inherited unlisted file
#
# It creates the user asx-doors, /tmp/asx-doors.*, the user's lingering
# manager, a loop-mounted ext4 image (sock_reused) and the network namespace
# asx-doors-remote with its veth pair (loopback_remote); all of that is undone at exit.
#
# Output: "PASS: <what>", "FAIL: <what> (<detail>)", "SKIP: <why>" and notes
# ("# ..."); then a count line and "ALL PASS" (exit 0) or "<n> FAILED" (exit 1).
#
# Environment:
#   ASX_DOORS_ONLY="name ..."  run only these checks;  ASX_DOORS_SKIP="name ..."  skip these
#   ASX_DOORS_KEEP=1           leave the user and files behind for debugging

set -u -o pipefail
umask 022
export LC_ALL=C # stable strerror() texts
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-doors.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-doors
readonly GECOS="agent-sandbox-exec doors test user"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist

CHECKS=(
	systemd_run busctl_transient tmux_outside stream_outside planted_listener scm_rights inherited_fd
	inherited_fd_chmod inherited_fd_below other_uid tmux_inside ssh_agent sock_reused planted_agents
	loopback_tcp loopback_udp loopback_mptcp loopback_own loopback_allow loopback_remote root_groups tools
)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_DOORS # run_check: ASX_DOORS_ONLY / ASX_DOORS_SKIP choose the checks
CMD_TIMEOUT=60
UENV=() T="" OUT="" ERR="" RC=0 TOK="" UH="" USR_UID="" SECRET="" D=""
SETUP_DONE=0 CLEANED=0 LINGER=0 NETNS=""
NEXT_PORT=28000 # port: each server of the loopback checks gets its own
BG_PIDS=()
MOUNTS=() # mnt (test-lib.sh): unmounted at exit

# ---------------------------------------------------------------- helpers

# set_list LINE...: the user's home list is exactly these lines
set_list() {
	install -d -o "$USR" -g "$USR" -m 0755 "$UH/.config" "$UH/.config/agent-sandbox-exec"
	printf '%s\n' "# $SUITE" "$@" >"$T/list"
	rm -f "$UH/$HOME_LIST_REL"
	install -o "$USR" -g "$USR" -m 0644 "$T/list" "$UH/$HOME_LIST_REL"
}


# no_secret FILE...: none of FILE holds the secret
no_secret() { ! has "$TOK" "$@"; }

# launch_ok: the last run_in was admitted (the launcher did not refuse)
launch_ok() { [ "$RC" -ne 2 ] || ! has "agent-sandbox-exec:" "$ERR"; }

# fresh NAME: an empty directory $D/NAME, the user's, world-traversable
fresh() { rm -rf "${D:?}/$1" && install -d -o "$USR" -g "$USR" -m 0755 "$D/$1"; }

# The helper programs (python3), run as the user: a listener, a client, a
# descriptor sender and receiver. Each prints one result word.
PY_LISTEN='import socket, sys, time
kind, addr = sys.argv[1], sys.argv[2]
t = {"stream": socket.SOCK_STREAM, "seqpacket": socket.SOCK_SEQPACKET, "dgram": socket.SOCK_DGRAM}[kind]
s = socket.socket(socket.AF_UNIX, t)
s.bind(("\0" + addr[1:]) if addr.startswith("@") else addr)
if t != socket.SOCK_DGRAM:
    s.listen(8)
open(sys.argv[3], "w").write("up\n")
time.sleep(120)'
PY_CONNECT='import socket, sys
kind, addr = sys.argv[1], sys.argv[2]
t = {"stream": socket.SOCK_STREAM, "seqpacket": socket.SOCK_SEQPACKET, "dgram": socket.SOCK_DGRAM}[kind]
s = socket.socket(socket.AF_UNIX, t)
a = ("\0" + addr[1:]) if addr.startswith("@") else addr
try:
    if t == socket.SOCK_DGRAM:
        s.sendto(b"x", a)
    else:
        s.connect(a)
    print("connected")
except OSError as e:
    print("refused:", e.strerror)'
PY_RECV='import socket, sys, os
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(1)
open(sys.argv[2], "w").write("up\n")
c, _ = s.accept()
msg, fds, flags, _ = socket.recv_fds(c, 16, 4)
if fds:
    print("got:", os.read(fds[0], 200).decode(errors="replace"))
else:
    print("nofd flags=%d" % flags)'
PY_SEND='import socket, sys, os
fd = os.open(sys.argv[2], os.O_RDONLY)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
socket.send_fds(s, [b"x"], [fd])
print("sent")'
# PY_SERVE PATH|DIR WANT DATA UP: a stream listener that sends each client the
# bytes of DATA. WANT 0: bound at PATH; else bound in DIR at b0.sock, b1.sock,
# ... (each kept bound) until one has inode number WANT ("noreuse <inodes>" in
# UP and exit 1 after 64). UP gets "up <path> <inode> <pid>" once it listens.
PY_SERVE='import socket, sys, os
where, want, data, up = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
keep = []
for i in range(1 if want == 0 else 64):
    p = where if want == 0 else os.path.join(where, "b%d.sock" % i)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(p)
    keep.append(p)
    if want == 0 or os.stat(p).st_ino == want:
        break
else:
    open(up, "w").write("noreuse %s\n" % " ".join(str(os.stat(k).st_ino) for k in keep))
    sys.exit(1)
s.listen(8)
open(up + ".tmp", "w").write("up %s %d %d\n" % (p, os.stat(p).st_ino, os.getpid()))
os.rename(up + ".tmp", up)
s.settimeout(140)
while True:
    c, _ = s.accept()
    c.sendall(open(data, "rb").read())
    c.close()'
# PY_TALK PATH [GO READY]: connect to PATH, print "first got: <what it sent>" or
# "first refused: <strerror>"; with GO and READY: then write READY, wait for
# the file GO (90 s at most) and do the same with the path GO holds ("second ...").
PY_TALK='import socket, sys, os, time
def talk(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
        s.settimeout(10)
        return "got: " + s.recv(200).decode(errors="replace").strip()
    except OSError as e:
        return "refused: " + (e.strerror or str(e))
    finally:
        s.close()
print("first", talk(sys.argv[1]), flush=True)
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write("up\n")
    t = time.time() + 90
    while not os.path.exists(sys.argv[2]) and time.time() < t:
        time.sleep(0.1)
    print("second", talk(open(sys.argv[2]).read().strip()), flush=True)'

# bg_listen KIND ADDR TAG: a listener of the user OUTSIDE the sandbox; waits until it is up
bg_listen() {
	timeout -k 5 150 runuser -u "$USR" -- python3 -c "$PY_LISTEN" "$1" "$2" "$D/up.$3" \
		</dev/null >/dev/null 2>"$T/listen.$3" &
	BG_PIDS+=("$!")
	wait_for 30 test -s "$D/up.$3"
}

# bg_listen_in KIND ADDR TAG: as bg_listen, inside a sandbox (the listener the agent makes)
bg_listen_in() {
	timeout -k 5 150 runuser -u "$USR" -- "$LAUNCHER" python3 -c "$PY_LISTEN" "$1" "$2" "$D/up.$3" \
		</dev/null >/dev/null 2>"$T/listen.$3" &
	BG_PIDS+=("$!")
	wait_for 30 test -s "$D/up.$3"
}


# PY_TRAP PATH UP GOT: the agent's Unix stream listener at PATH; writes UP once it
# listens, then appends whatever each client sends to GOT ("accepted" first).
PY_TRAP='import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[2], "w").write("up\n")
s.settimeout(140)
while True:
    c, _ = s.accept()
    with open(sys.argv[3], "ab") as f:
        f.write(b"accepted\n")
        c.settimeout(3)
        try:
            f.write(c.recv(4096))
        except OSError:
            pass
    c.close()'
# PY_NET_SERVE PROTO ADDR PORT UP: a server on ADDR:PORT (PROTO tcp, mptcp or udp;
# python3-minimal has no http.server): "served" to each TCP client, "served <data>"
# back to each datagram. Writes UP once bound, "unsupported" there if the kernel
# has no such protocol.
PY_NET_SERVE='import socket, sys
proto, addr, port, up = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
try:
    if proto == "udp":
        s = socket.socket(fam, socket.SOCK_DGRAM)
    else:
        s = socket.socket(fam, socket.SOCK_STREAM, 262 if proto == "mptcp" else 0)
except OSError as e:
    open(up, "w").write("unsupported %s\n" % e.strerror)
    sys.exit(0)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
if fam == socket.AF_INET6:
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind((addr, port))
if proto != "udp":
    s.listen(16)
open(up, "w").write("up\n")
s.settimeout(170)
while True:
    if proto == "udp":
        data, peer = s.recvfrom(200)
        s.sendto(b"served " + data, peer)
    else:
        c, _ = s.accept()
        c.sendall(b"served\n")
        c.close()'
# PY_NET_ASK PROTO ADDR PORT [SRC]: ask a server (PROTO tcp, mptcp, udp: sendto, udpc:
# connect then send) from a socket bound to SRC if given (UDP ones may broadcast);
# ADDR may carry an IPv6 scope (ff02::1%IFNAME). Prints "served..." or "refused: <strerror>".
PY_NET_ASK='import socket, sys
proto, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
src = sys.argv[4] if len(sys.argv) > 4 else None
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
dst = (addr, port)
if "%" in addr:
    a, ifname = addr.split("%")
    dst = (a, port, 0, socket.if_nametoindex(ifname))
try:
    if proto in ("udp", "udpc"):
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    else:
        s = socket.socket(fam, socket.SOCK_STREAM, 262 if proto == "mptcp" else 0)
    s.settimeout(5)
    if src:
        s.bind((src, 0))
    if proto == "udpc":
        s.connect(dst)
        s.send(b"hello")
        print(s.recv(200).decode(errors="replace"))
    elif proto == "udp":
        s.sendto(b"hello", dst)
        print(s.recv(200).decode(errors="replace"))
    else:
        s.connect(dst)
        print(s.recv(200).decode(errors="replace").strip())
except OSError as e:
    print("refused:", e.strerror or str(e))'

# port: the next free test port in NEXT_PORT
port() { NEXT_PORT=$((NEXT_PORT + 1)); }

# serve WHO PROTO ADDR PORT TAG: a server (PY_NET_SERVE) run by WHO: "out" (the user,
# outside), "in" (the user, inside a sandbox) or "root"; waits until it is up
serve() {
	local who=$1 up=$D/up.$5
	shift
	rm -f "$up"
	case $who in
	out) timeout -k 5 180 runuser -u "$USR" -- python3 -c "$PY_NET_SERVE" "$1" "$2" "$3" "$up" ;;
	in) timeout -k 5 180 runuser -u "$USR" -- "$LAUNCHER" python3 -c "$PY_NET_SERVE" "$1" "$2" "$3" "$up" ;;
	root) timeout -k 5 180 python3 -c "$PY_NET_SERVE" "$1" "$2" "$3" "$up" ;;
	esac </dev/null >/dev/null 2>"$T/serve.$4" &
	BG_PIDS+=("$!")
	wait_for 30 test -s "$up"
}

# ask_in / ask_out PROTO ADDR PORT: PY_NET_ASK inside the sandbox / outside, as the user
ask_in() { run_in "$USR" python3 -c "$PY_NET_ASK" "$@"; }
ask_out() { run_as "$USR" python3 -c "$PY_NET_ASK" "$@"; }

# refused_in WHAT PROTO ADDR PORT: PASS WHAT if asking inside is refused with EPERM
refused_in() {
	local what=$1
	shift
	ask_in "$@"
	okl "$what" 'stdout: $(snip "$OUT"), $(why)' has "refused: Operation not permitted" "$OUT"
}

# served_in / served_out WHAT PROTO ADDR PORT: PASS WHAT if the server answers
served_in() {
	local what=$1
	shift
	ask_in "$@"
	okl "$what" 'stdout: $(snip "$OUT"), $(why)' has served "$OUT"
}
served_out() {
	local what=$1
	shift
	ask_out "$@"
	okl "$what" 'stdout: $(snip "$OUT"), $(why)' has served "$OUT"
}

# ---------------------------------------------------------------- checks

check_systemd_run() {
	local out=$T/sr.out
	run_as "$USR" "${UENV[@]}" systemd-run --user --pipe --wait --quiet cat "$SECRET"
	if ! has "$TOK" "$OUT"; then
		fail "systemd_run: control: systemd-run --user cat SECRET reads it outside" "$(why)"
		return
	fi
	run_in "$USR" "${UENV[@]}" systemd-run --user --pipe --wait --quiet cat "$SECRET"
	cp "$OUT" "$out"
	okl "systemd_run: systemd-run --user --pipe cat SECRET from inside does not read it" \
		'rc=$RC, stdout: $(snip "$out"), stderr: $(snip "$ERR")' no_secret "$out"
	okl "systemd_run: the launch was admitted and systemd-run failed" '$(why)' \
		eval 'launch_ok && [ "$RC" -ne 0 ]'
}

check_busctl_transient() {
	local f
	fresh bt
	f=$D/bt/out
	# StartTransientUnit(name, mode, properties a(sv), aux a(sa(sv))); ExecStart is a(sasb)
	cat >"$D/bt/start.sh" <<EOF
exec ${UENV[*]} busctl --user -- call org.freedesktop.systemd1 /org/freedesktop/systemd1 \\
	org.freedesktop.systemd1.Manager StartTransientUnit 'ssa(sv)a(sa(sv))' \\
	"\$1" fail 1 ExecStart 'a(sasb)' 1 /bin/sh 3 /bin/sh -c "cat $SECRET > $f" false 0
EOF
	run_as "$USR" sh "$D/bt/start.sh" "asx-bt-out-$TOK.service"
	if ! wait_for 20 has "$TOK" "$f"; then
		fail "busctl_transient: control: StartTransientUnit copies SECRET outside" "$(why)"
		return
	fi
	rm -f "$f"
	run_in "$USR" sh "$D/bt/start.sh" "asx-bt-in-$TOK.service"
	sleep 3
	okl "busctl_transient: busctl --user StartTransientUnit from inside reads nothing" \
		'rc=$RC, $f: $(snip "$f"), stderr: $(snip "$ERR")' eval '[ ! -e "$f" ] && launch_ok && [ "$RC" -ne 0 ]'
}

check_tmux_outside() {
	local s f
	fresh tmo
	s=$D/tmo/sock f=$D/tmo/out
	run_as "$USR" tmux -S "$s" new-session -d -s asx "sleep 300"
	run_as "$USR" tmux -S "$s" new-window -d -t asx "cat $SECRET > $f.ctl"
	if ! wait_for 10 has "$TOK" "$f.ctl"; then
		fail "tmux_outside: control: new-window cat SECRET reads it outside" "$(why)"
		return
	fi
	run_in "$USR" tmux -S "$s" new-window -d -t asx "cat $SECRET > $f"
	sleep 2
	okl "tmux_outside: tmux new-window to a server started outside reads nothing" \
		'rc=$RC, $f: $(snip "$f"), stderr: $(snip "$ERR")' eval '[ ! -e "$f" ] && launch_ok && [ "$RC" -ne 0 ]'
	run_as "$USR" tmux -S "$s" kill-server
}

check_stream_outside() {
	local k a tag
	for k in stream seqpacket dgram; do
		for a in "$D/so-$k.sock" "@asx-doors-$k-$TOK"; do
			tag=$k-path
			[ "${a:0:1}" = @ ] && tag=$k-abstract
			rm -f "$D/so-$k.sock"
			if ! bg_listen "$k" "$a" "$tag"; then
				fail "stream_outside: a $k listener at $a" "$(snip "$T/listen.$tag")"
				continue
			fi
			run_as "$USR" python3 -c "$PY_CONNECT" "$k" "$a"
			if ! has connected "$OUT"; then
				fail "stream_outside: control: $k to $a from outside" "$(snip "$OUT") $(why)"
				continue
			fi
			run_in "$USR" python3 -c "$PY_CONNECT" "$k" "$a"
			okl "stream_outside: $k to a same-uid socket made outside ($a) is refused (EPERM)" \
				'stdout: $(snip "$OUT"), $(why)' has "refused: Operation not permitted" "$OUT"
		done
	done
}

# A listener the agent makes inside, at a path where the user's tools connect (its own
# $SSH_AUTH_SOCK) or abstract: the user's outside clients are refused; the sandbox's own clients
# (the way back in: agent-sandbox-exec tmux attach) and root's are not.
check_planted_listener() {
	local k a tag
	for k in stream seqpacket dgram; do
		for a in "$D/pl-$k.sock" "@asx-planted-$k-$TOK"; do
			tag=pl-$k-path
			[ "${a:0:1}" = @ ] && tag=pl-$k-abstract
			rm -f "$D/pl-$k.sock" "$D/up.$tag"
			if ! bg_listen_in "$k" "$a" "$tag"; then
				fail "planted_listener: a $k listener at $a inside" "$(snip "$T/listen.$tag")"
				continue
			fi
			run_in "$USR" python3 -c "$PY_CONNECT" "$k" "$a"
			okl "planted_listener: $k to it ($a) from inside the sandbox connects" \
				'stdout: $(snip "$OUT"), $(why)' has connected "$OUT"
			run_as "$USR" python3 -c "$PY_CONNECT" "$k" "$a"
			okl "planted_listener: $k to it ($a) from the user's process outside is refused (EPERM)" \
				'stdout: $(snip "$OUT"), $(why)' has "refused: Operation not permitted" "$OUT"
			run_as root python3 -c "$PY_CONNECT" "$k" "$a"
			okl "planted_listener: $k to it ($a) from root outside connects" \
				'stdout: $(snip "$OUT"), $(why)' has connected "$OUT"
			stop_bg "${BG_PIDS[-1]}"
		done
	done
}

check_scm_rights() {
	local s=$D/scm/sock
	fresh scm
	timeout -k 5 60 runuser -u "$USR" -- "$LAUNCHER" python3 -c "$PY_RECV" "$s" "$D/scm/up" \
		</dev/null >"$T/scm.out" 2>"$T/scm.err" &
	local rpid=$!
	BG_PIDS+=("$rpid")
	if ! wait_for 30 test -s "$D/scm/up"; then
		fail "scm_rights: a sandboxed receiver listens" "$(snip "$T/scm.err")"
		return
	fi
	# Root's: the user's outside processes cannot connect to a socket made inside
	# (check_planted_listener).
	run_as root python3 -c "$PY_SEND" "$s" "$SECRET"
	if ! has sent "$OUT"; then
		fail "scm_rights: root outside sends a descriptor of SECRET" "$(why)"
		return
	fi
	wait_for 20 pid_gone "$rpid"
	okl "scm_rights: a descriptor of SECRET sent over SCM_RIGHTS is not received inside" \
		'receiver: $(snip "$T/scm.out") $(snip "$T/scm.err")' \
		eval 'has nofd "$T/scm.out" && no_secret "$T/scm.out"'
}

check_inherited_fd() {
	run_as "$USR" sh -c 'exec 3<"$1"; exec "$2" sh -c "cat <&3"' sh "$SECRET" "$LAUNCHER"
	okl "inherited_fd: fd 3 open on SECRET: the launch is refused (exit 2, naming fd 3)" \
		'stdout: $(snip "$OUT"), $(why)' \
		eval 'no_secret "$OUT" && [ "$RC" -eq 2 ] && has "descriptor 3" "$ERR"'
	run_as "$USR" sh -c 'exec "$2" cat <"$1"' sh "$SECRET" "$LAUNCHER"
	okl "inherited_fd: stdin redirected from SECRET: the launch is refused (exit 2, naming fd 0)" \
		'stdout: $(snip "$OUT"), $(why)' \
		eval 'no_secret "$OUT" && [ "$RC" -eq 2 ] && has "descriptor 0" "$ERR"'
}

check_inherited_fd_chmod() {
	# An outside shell holds fd 3 on SECRET; SECRET is made unreadable (chmod 000: from
	# inside a sandbox that is refused, a listed file's attributes are protected; so outside);
	# the shell's next launch passes fd 3 on.
	run_as "$USR" sh -c 'exec 3<"$1"
		"$2" chmod 000 "$1" 3<&- 2>/dev/null && echo "inside chmod: done" >&2
		chmod 000 "$1"
		echo "mode=[$(stat -c %a "$1")]" >&2
		exec "$2" sh -c "cat <&3"' sh "$SECRET" "$LAUNCHER"
	chmod 0600 "$SECRET"
	okl "inherited_fd_chmod: a chmod of SECRET from inside is refused" '$(why)' \
		eval '! has "inside chmod: done" "$ERR"'
	if ! has "mode=[0]" "$ERR"; then
		fail "inherited_fd_chmod: control: chmod 000 SECRET outside" "$(why)"
		return
	fi
	okl "inherited_fd_chmod: fd 3 open on SECRET made unreadable: the launch is refused (exit 2, naming fd 3)" \
		'stdout: $(snip "$OUT"), $(why)' \
		eval 'no_secret "$OUT" && [ "$RC" -eq 2 ] && has "descriptor 3" "$ERR"'
}

check_inherited_fd_below() {
	# The same for a file denied only by a directory entry (it has no key of its own: the
	# launcher's reopen judges the descriptor), where a mode keeping the user out would make that
	# reopen fail with EACCES instead of EPERM. From inside, its mode cannot be changed.
	local k=$D/vault/k
	fresh vault
	printf '%s\n' "$TOK-below" >"$k" && chown "$USR:$USR" "$k" && chmod 0600 "$k"
	set_list "$SECRET" "$D/vault/"
	run_as "$USR" sh -c 'exec 3<"$1"
		"$2" chmod 000 "$1" 3<&-
		echo "chmod=[$?] mode=[$(stat -c %a "$1")]" >&2
		exec "$2" sh -c "cat <&3"' sh "$k" "$LAUNCHER"
	chmod 0600 "$k"
	okl "inherited_fd_below: inside, chmod 000 of a file below a directory entry is refused" \
		'$(why)' eval 'has "chmod=[1]" "$ERR" && has "Operation not permitted" "$ERR" && has "mode=[600]" "$ERR"'
	okl "inherited_fd_below: fd 3 open on it: the launch is refused (exit 2, naming fd 3)" \
		'stdout: $(snip "$OUT"), $(why)' \
		eval '! has "$TOK-below" "$OUT" && [ "$RC" -eq 2 ] && has "descriptor 3" "$ERR"'
	set_list "$SECRET"
}

check_other_uid() {
	run_in "$USR" getent passwd root
	okl "other_uid: getent passwd root works inside" '$(why)' has "root:x:0:0" "$OUT"
	run_in "$USR" logger -t asx-doors "journal-$TOK"
	okl "other_uid: logger works inside" '$(why)' eval '[ "$RC" -eq 0 ]'
	okl "other_uid: logger's line reached the journal" 'journalctl has no journal-$TOK' \
		wait_for 20 eval 'journalctl -q -t asx-doors --no-pager 2>/dev/null | grep -q "journal-$TOK"'
	run_in "$USR" busctl --system call org.freedesktop.DBus /org/freedesktop/DBus \
		org.freedesktop.DBus GetId
	okl "other_uid: busctl --system works inside" '$(why)' eval '[ "$RC" -eq 0 ] && has "s " "$OUT"'
	run_in "$USR" getent hosts localhost
	okl "other_uid: getent hosts localhost works inside" '$(why)' eval '[ "$RC" -eq 0 ]'
	run_in "$USR" "$LAUNCHER" cat /etc/hostname
	okl "other_uid: a nested launch reaches the daemon's socket" '$(why)' eval '[ "$RC" -eq 0 ]'
}

check_tmux_inside() {
	local s f
	fresh tmi
	s=$D/tmi/sock f=$D/tmi/out
	run_in "$USR" sh -c 'tmux -S "$1" new-session -d -s in "sleep 60" &&
		tmux -S "$1" new-window -d -t in "echo inside-ok > $2" && sleep 2 &&
		tmux -S "$1" list-windows -t in; tmux -S "$1" kill-server' sh "$s" "$f"
	okl "tmux_inside: a tmux server started inside takes new windows from inside" \
		'$f: $(snip "$f"), $(why)' has inside-ok "$f"
}

check_ssh_agent() {
	local a=$D/ssh/agent.sock a2=$D/ssh/agent2.sock
	fresh ssh
	timeout -k 5 300 runuser -u "$USR" -- ssh-agent -D -a "$a" </dev/null >/dev/null 2>&1 &
	BG_PIDS+=("$!")
	timeout -k 5 300 runuser -u "$USR" -- ssh-agent -D -a "$a2" </dev/null >/dev/null 2>&1 &
	BG_PIDS+=("$!")
	if ! wait_for 20 test -S "$a" || ! wait_for 20 test -S "$a2"; then
		fail "ssh_agent: two ssh-agents start" "no sockets"
		return
	fi
	run_as "$USR" ssh-keygen -q -t ed25519 -N "" -C "asx-$TOK" -f "$D/ssh/key"
	run_as "$USR" env SSH_AUTH_SOCK="$a" ssh-add "$D/ssh/key"
	run_as "$USR" env SSH_AUTH_SOCK="$a2" ssh-add "$D/ssh/key"
	run_as "$USR" env SSH_AUTH_SOCK="$a" ssh-add -l
	if ! has "asx-$TOK" "$OUT"; then
		fail "ssh_agent: control: ssh-add -l outside" "$(why)"
		return
	fi
	run_in "$USR" env SSH_AUTH_SOCK="$a" ssh-add -l
	okl "ssh_agent: without a socket line the agent is refused inside" \
		'stdout: $(snip "$OUT"), $(why)' eval '! has "asx-$TOK" "$OUT" && launch_ok'
	set_list "$SECRET" 'socket $SSH_AUTH_SOCK'
	runuser -u "$USR" -- env SSH_AUTH_SOCK="$a" "$LAUNCHER" ssh-add -l </dev/null >"$OUT" 2>"$ERR"
	RC=$?
	okl "ssh_agent: with 'socket \$SSH_AUTH_SOCK' listed, ssh-add -l works inside" \
		'stdout: $(snip "$OUT"), $(why)' has "asx-$TOK" "$OUT"
	okl "ssh_agent: the launch says the socket is allowed" '$(why)' has "$a" "$ERR"
	run_in "$USR" env SSH_AUTH_SOCK="$a" cat "$SECRET"
	okl "ssh_agent: the secret stays denied" '$(why)' no_secret "$OUT"
	# From inside, with another agent in SSH_AUTH_SOCK: no new allow.
	runuser -u "$USR" -- env SSH_AUTH_SOCK="$a" "$LAUNCHER" \
		sh -c 'SSH_AUTH_SOCK="$1" "$2" ssh-add -l; echo "first: $?"; SSH_AUTH_SOCK="$3" ssh-add -l' \
		sh "$a2" "$LAUNCHER" "$a" </dev/null >"$OUT" 2>"$ERR"
	RC=$?
	okl "ssh_agent: a launch from inside allows no other agent (and says so)" \
		'stdout: $(snip "$OUT"), $(why)' \
		eval 'has "first: 2" "$OUT" && has "not applied" "$ERR"'
	# 'first: 2' is ssh-add's "cannot connect"; the earlier allow still works from inside
	okl "ssh_agent: the outside launch's allow still holds after the inside launch" \
		'stdout: $(snip "$OUT")' has "asx-$TOK" "$OUT"
	set_list "$SECRET"
}

# sock_reused: the sandbox is allowed socket A (a `socket` line); A's listener
# exits and A is removed, which frees its inode; another outside listener binds
# B, which gets A's inode number (ext4 hands out the lowest free one); a task
# of the sandbox that was allowed A connects to B. B serves SECRET (a control
# shows it does, outside), so a connect that is let through reads it.
check_sock_reused() {
	local m=$D/rs c=$D/rsctl img=$T/rs.img ino pid b in_pid
	fresh rsctl
	if ! truncate -s 32M "$img" || ! mkfs.ext4 -q -F "$img" >/dev/null 2>&1 ||
		! mnt "$m" -o loop "$img" || ! chown "$USR:$USR" "$m"; then
		fail "sock_reused: an ext4 image mounted at $m" "$(snip "$T/mount.err")"
		return
	fi
	printf 'listener-a\n' >"$c/a.txt" && chmod 0644 "$c/a.txt"
	timeout -k 5 200 runuser -u "$USR" -- python3 -c "$PY_SERVE" "$m/a.sock" 0 "$c/a.txt" "$c/up.a" \
		</dev/null >/dev/null 2>"$c/a.err" &
	BG_PIDS+=("$!")
	if ! wait_for 30 test -s "$c/up.a"; then
		fail "sock_reused: listener A starts" "$(snip "$c/a.err")"
		return
	fi
	read -r _ _ ino pid <"$c/up.a"
	set_list "$SECRET" "socket $m/a.sock"
	timeout -k 5 200 runuser -u "$USR" -- "$LAUNCHER" python3 -c "$PY_TALK" "$m/a.sock" "$c/go" "$c/ready" \
		</dev/null >"$c/in.out" 2>"$c/in.err" &
	in_pid=$!
	BG_PIDS+=("$in_pid")
	if ! wait_for 60 test -s "$c/ready" || ! has "first got: listener-a" "$c/in.out"; then
		fail "sock_reused: control: the allowed socket A (inode $ino) is reached from inside" \
			"inside: $(snip "$c/in.out") $(snip "$c/in.err")"
		set_list "$SECRET"
		return
	fi
	pass "sock_reused: control: the allowed socket A (inode $ino) is reached from inside"
	# A goes away: no name, no open socket, so its inode is freed.
	rm -f "$m/a.sock"
	kill "$pid" 2>/dev/null
	if ! wait_for 20 pid_gone "$pid"; then
		fail "sock_reused: listener A exits" "pid $pid still there"
		set_list "$SECRET"
		return
	fi
	timeout -k 5 200 runuser -u "$USR" -- python3 -c "$PY_SERVE" "$m" "$ino" "$SECRET" "$c/up.b" \
		</dev/null >/dev/null 2>"$c/b.err" &
	BG_PIDS+=("$!")
	wait_for 30 test -s "$c/up.b"
	if ! has "up " "$c/up.b"; then
		fail "sock_reused: control: a socket bound after A's removal gets A's inode number $ino" \
			"$(snip "$c/up.b") $(snip "$c/b.err")"
		set_list "$SECRET"
		return
	fi
	read -r _ b _ _ <"$c/up.b"
	run_as "$USR" python3 -c "$PY_TALK" "$b"
	if ! has "first got: asx-secret-$TOK" "$OUT"; then
		fail "sock_reused: control: B ($b) serves SECRET outside" "$(snip "$OUT") $(why)"
		set_list "$SECRET"
		return
	fi
	printf '%s\n' "$b" >"$c/go.tmp" && mv "$c/go.tmp" "$c/go"
	wait_for 40 pid_gone "$in_pid"
	okl "sock_reused: B, another outside listener's socket with A's inode number $ino, is refused inside (EPERM)" \
		'inside: $(snip "$c/in.out") $(snip "$c/in.err")' \
		eval 'has "second refused: Operation not permitted" "$c/in.out" && no_secret "$c/in.out"'
	set_list "$SECRET"
}

# The agent replaces the user's agent sockets with listeners of its own: the user's outside
# clients must not reach them (the listener would get a key, a password or a request).
check_planted_agents() {
	local a=$D/pa/agent.sock cc=$D/pa/cache/socket gpg=$D/pa/gnupg/S.gpg-agent key=$D/pa/key
	fresh pa
	install -d -o "$USR" -g "$USR" -m 0700 "$D/pa/cache" "$D/pa/gnupg"
	timeout -k 5 200 runuser -u "$USR" -- ssh-agent -D -a "$a" </dev/null >/dev/null 2>&1 &
	BG_PIDS+=("$!")
	if ! wait_for 20 test -S "$a"; then
		fail "planted_agents: the user's ssh-agent starts outside" "no socket"
		return
	fi
	run_as "$USR" ssh-keygen -q -t ed25519 -N "" -C "asx-$TOK" -f "$key"
	# Inside: the agent removes the user's socket and binds its own at the same path;
	# the same at git's credential-cache socket and gpg-agent's.
	local p tag
	for p in "$a" "$cc" "$gpg"; do
		tag=$(basename "$p")
		timeout -k 5 150 runuser -u "$USR" -- "$LAUNCHER" sh -c 'rm -f "$1"; exec python3 -c "$2" "$1" "$3" "$4"' \
			sh "$p" "$PY_TRAP" "$D/pa/up.$tag" "$D/pa/got.$tag" </dev/null >/dev/null 2>"$T/trap.$tag" &
		BG_PIDS+=("$!")
		if ! wait_for 30 test -s "$D/pa/up.$tag"; then
			fail "planted_agents: the agent binds its own listener at $p inside" "$(snip "$T/trap.$tag")"
			return
		fi
	done
	run_as "$USR" env SSH_AUTH_SOCK="$a" ssh-add "$key"
	okl "planted_agents: the user's outside ssh-add cannot reach the agent's listener at \$SSH_AUTH_SOCK" \
		'ssh-add rc $RC, $(why); listener got: $(snip "$D/pa/got.agent.sock")' \
		eval '[ "$RC" -ne 0 ] && [ ! -e "$D/pa/got.agent.sock" ]'
	run_as "$USR" sh -c 'printf "protocol=https\nhost=example.com\nusername=u\npassword=pw-%s\n\n" "$2" |
		git credential-cache --socket "$1" store' sh "$cc" "$TOK"
	okl "planted_agents: the user's outside git credential-cache store hands the agent's listener no password" \
		'rc $RC, $(why); listener got: $(snip "$D/pa/got.socket")' \
		eval '! has "pw-$TOK" "$D/pa/got.socket" 2>/dev/null && [ ! -e "$D/pa/got.socket" ]'
	# gpg is not in the guest image: a client of the user's, as gpg would connect.
	run_as "$USR" python3 -c "$PY_CONNECT" stream "$gpg"
	okl "planted_agents: the user's outside client at ~/.gnupg/S.gpg-agent is refused (EPERM)" \
		'stdout: $(snip "$OUT"), $(why)' \
		eval 'has "refused: Operation not permitted" "$OUT" && [ ! -e "$D/pa/got.S.gpg-agent" ]'
}

# zero_reaches_source CHECK PROTO ASK...: 0.0.0.0 goes to the socket's source address, not
# always to 127.0.0.1: the user's PROTO server on 127.0.0.2 answers outside an ASK (PY_NET_ASK's
# first argument) to 0.0.0.0 from a socket bound to 127.0.0.2, and each ASK inside is refused.
zero_reaches_source() {
	local check=$1 proto=$2 p a
	shift 2
	port
	p=$NEXT_PORT
	if ! serve out "$proto" 127.0.0.2 "$p" "z$proto"; then
		fail "$check: the user's $proto server on 127.0.0.2:$p outside" "$(snip "$T/serve.z$proto")"
		return
	fi
	served_out "$check: control: the user's $proto server on 127.0.0.2 answers outside ($1 to 0.0.0.0 from 127.0.0.2)" \
		"$1" 0.0.0.0 "$p" 127.0.0.2
	for a in "$@"; do
		refused_in "$check: inside, $a to 0.0.0.0:$p from a socket bound to 127.0.0.2 (the user's server there) is refused" \
			"$a" 0.0.0.0 "$p" 127.0.0.2
	done
}

check_loopback_tcp() {
	local p a
	port
	p=$NEXT_PORT
	if ! serve out tcp 127.0.0.1 "$p" lt4; then
		fail "loopback_tcp: the user's server on 127.0.0.1:$p outside" "$(snip "$T/serve.lt4")"
		return
	fi
	served_out "loopback_tcp: control: the user's TCP server on 127.0.0.1 answers outside" tcp 127.0.0.1 "$p"
	for a in 127.0.0.1 0.0.0.0 ::ffff:127.0.0.1; do
		refused_in "loopback_tcp: inside, connect to $a:$p (the user's server on 127.0.0.1) is refused" \
			tcp "$a" "$p"
	done
	# tcp_v6_connect() sends "::" to 127.0.0.1 when the socket is bound to an IPv4-mapped address.
	refused_in "loopback_tcp: inside, connect to [::]:$p from a socket bound to ::ffff:127.0.0.1 is refused" \
		tcp :: "$p" ::ffff:127.0.0.1
	zero_reaches_source loopback_tcp tcp tcp
	port
	p=$NEXT_PORT
	if serve out tcp ::1 "$p" lt6; then
		served_out "loopback_tcp: control: the user's server on [::1] answers outside" tcp ::1 "$p"
		for a in ::1 ::; do
			refused_in "loopback_tcp: inside, connect to [$a]:$p (the user's server on ::1) is refused" \
				tcp "$a" "$p"
		done
	else
		fail "loopback_tcp: the user's server on [::1]:$p outside" "$(snip "$T/serve.lt6")"
	fi
	port
	p=$NEXT_PORT
	if serve out tcp :: "$p" ltw; then
		for a in 127.0.0.1 127.0.0.2 ::1 ::ffff:127.0.0.1 ::; do
			refused_in "loopback_tcp: inside, connect to $a:$p (the user's dual-stack wildcard server) is refused" \
				tcp "$a" "$p"
		done
	else
		fail "loopback_tcp: the user's server on [::]:$p outside" "$(snip "$T/serve.ltw")"
	fi
	port
	p=$NEXT_PORT
	if serve root tcp 127.0.0.1 "$p" ltr; then
		served_in "loopback_tcp: inside, root's TCP server on 127.0.0.1 answers" tcp 127.0.0.1 "$p"
	else
		fail "loopback_tcp: root's server on 127.0.0.1:$p" "$(snip "$T/serve.ltr")"
	fi
}

check_loopback_udp() {
	local p
	port
	p=$NEXT_PORT
	if ! serve out udp 127.0.0.1 "$p" lu4; then
		fail "loopback_udp: the user's UDP server on 127.0.0.1:$p outside" "$(snip "$T/serve.lu4")"
		return
	fi
	served_out "loopback_udp: control: the user's UDP server answers outside" udp 127.0.0.1 "$p"
	refused_in "loopback_udp: inside, sendto the user's UDP server is refused" udp 127.0.0.1 "$p"
	refused_in "loopback_udp: inside, connect and send to the user's UDP server is refused" udpc 127.0.0.1 "$p"
	refused_in "loopback_udp: inside, connect to [::]:$p from a socket bound to ::ffff:127.0.0.1 and send is refused" \
		udpc :: "$p" ::ffff:127.0.0.1
	zero_reaches_source loopback_udp udp udp udpc
	port
	p=$NEXT_PORT
	if serve out udp ::1 "$p" lu6; then
		refused_in "loopback_udp: inside, sendto the user's UDP server on ::1 is refused" udp ::1 "$p"
	else
		fail "loopback_udp: the user's UDP server on [::1]:$p outside" "$(snip "$T/serve.lu6")"
	fi
	port
	p=$NEXT_PORT
	if serve root udp 127.0.0.1 "$p" lur; then
		served_in "loopback_udp: inside, root's UDP server answers" udp 127.0.0.1 "$p"
	else
		fail "loopback_udp: root's UDP server on 127.0.0.1:$p" "$(snip "$T/serve.lur")"
	fi
}

check_loopback_mptcp() {
	local p
	port
	p=$NEXT_PORT
	if ! serve out mptcp 127.0.0.1 "$p" lm; then
		fail "loopback_mptcp: the user's MPTCP listener on 127.0.0.1:$p outside" "$(snip "$T/serve.lm")"
		return
	fi
	if has unsupported "$D/up.lm"; then
		skip "loopback_mptcp: this kernel has no MPTCP ($(snip "$D/up.lm"))"
		return
	fi
	served_out "loopback_mptcp: control: the user's MPTCP listener answers outside" mptcp 127.0.0.1 "$p"
	refused_in "loopback_mptcp: inside, an MPTCP connect to it is refused" mptcp 127.0.0.1 "$p"
	refused_in "loopback_mptcp: inside, a plain TCP connect to it is refused" tcp 127.0.0.1 "$p"
}

check_loopback_own() {
	local p q
	port
	p=$NEXT_PORT
	port
	q=$NEXT_PORT
	if ! serve in tcp 127.0.0.1 "$p" lot || ! serve in udp 127.0.0.1 "$q" lou; then
		fail "loopback_own: the agent's servers start inside" "$(snip "$T/serve.lot") $(snip "$T/serve.lou")"
		return
	fi
	served_in "loopback_own: the agent's own TCP server answers inside" tcp 127.0.0.1 "$p"
	served_in "loopback_own: the agent's own UDP server answers inside" udp 127.0.0.1 "$q"
	served_out "loopback_own: the agent's TCP server answers the user's outside client (a browser)" \
		tcp 127.0.0.1 "$p"
	served_out "loopback_own: the agent's UDP server answers the user's outside client" udp 127.0.0.1 "$q"
}

check_loopback_allow() {
	local p q
	port
	p=$NEXT_PORT
	port
	q=$NEXT_PORT
	if ! serve out tcp 127.0.0.1 "$p" lat || ! serve out udp 127.0.0.1 "$q" lau; then
		fail "loopback_allow: the user's servers outside" "$(snip "$T/serve.lat") $(snip "$T/serve.lau")"
		return
	fi
	refused_in "loopback_allow: without a line the user's TCP server is refused" tcp 127.0.0.1 "$p"
	set_list "$SECRET" "socket tcp:$p"
	served_in "loopback_allow: with 'socket tcp:$p' (an outside launch) the server answers inside" \
		tcp 127.0.0.1 "$p"
	okl "loopback_allow: the outside launch says the port is allowed" '$(why)' has "socket tcp:$p allowed" "$ERR"
	refused_in "loopback_allow: 'socket tcp:$p' allows no UDP" udp 127.0.0.1 "$q"
	# A line added to the list (by the user, outside: the agent cannot edit it,
	# test-writes.sh::check_own_list) while a sandbox runs, and a launch from inside it: no
	# new allow, and it says so; the outside launch's allow stays.
	run_in_after "$USR" 'printf "socket udp:%s\n" "$q" | runuser -u "$USR" -- tee -a "$UH/$HOME_LIST_REL" >/dev/null' \
		sh -c '"$1" python3 -c "$2" udp 127.0.0.1 "$3"; "$1" python3 -c "$2" tcp 127.0.0.1 "$4"' \
		sh "$LAUNCHER" "$PY_NET_ASK" "$q" "$p"
	okl "loopback_allow: a launch from inside does not apply 'socket udp:$q' (and says so)" \
		'stdout: $(snip "$OUT"), $(why)' \
		eval 'has "refused: Operation not permitted" "$OUT" && has "port udp:$q stays refused" "$ERR"'
	okl "loopback_allow: the outside launch's 'socket tcp:$p' still holds" 'stdout: $(snip "$OUT")' has served "$OUT"
	served_in "loopback_allow: the next launch from outside applies 'socket udp:$q'" udp 127.0.0.1 "$q"
	set_list "$SECRET"
	refused_in "loopback_allow: a launch from outside without the lines takes the allow back" tcp 127.0.0.1 "$p"
}

# A network namespace behind a veth pair stands for a remote host (the guest has no network).
check_loopback_remote() {
	local p host=10.213.0.1 remote=10.213.0.2
	if ! ip netns add asx-doors-remote; then
		fail "loopback_remote: ip netns add" "no network namespace"
		return
	fi
	NETNS=asx-doors-remote
	ip link add asx-d0 type veth peer name asx-d1 netns "$NETNS" &&
		ip addr add "$host/24" brd + dev asx-d0 && ip link set asx-d0 up &&
		ip -n "$NETNS" addr add "$remote/24" dev asx-d1 && ip -n "$NETNS" link set asx-d1 up &&
		ip -n "$NETNS" link set lo up
	port
	p=$NEXT_PORT
	# The user's server on the "remote host", and a wildcard one of the user's here on the same port.
	rm -f "$D/up.lrr"
	timeout -k 5 180 ip netns exec "$NETNS" runuser -u "$USR" -- python3 -c "$PY_NET_SERVE" tcp 0.0.0.0 "$p" "$D/up.lrr" \
		</dev/null >/dev/null 2>"$T/serve.lrr" &
	BG_PIDS+=("$!")
	if ! wait_for 30 test -s "$D/up.lrr" || ! serve out tcp 0.0.0.0 "$p" lrw; then
		fail "loopback_remote: the servers start" "$(snip "$T/serve.lrr") $(snip "$T/serve.lrw")"
		return
	fi
	wait_for 20 eval 'ask_out tcp "$remote" "$p"; has served "$OUT"'
	served_in "loopback_remote: inside, the user's server on a remote address answers (a wildcard server of the user's here has the same port)" \
		tcp "$remote" "$p"
	run_in "$USR" curl --http0.9 -sS -m 10 "http://$remote:$p/"
	okl "loopback_remote: inside, curl reaches the remote address" 'stdout: $(snip "$OUT"), $(why)' has served "$OUT"
	refused_in "loopback_remote: inside, the host's own veth address $host (added after the daemon started) is refused like loopback" \
		tcp "$host" "$p"
	# A datagram to a broadcast or multicast address loops back to the user's wildcard UDP server.
	port
	p=$NEXT_PORT
	if serve out udp :: "$p" lrb; then
		served_out "loopback_remote: control: the user's wildcard UDP server answers a broadcast to 10.213.0.255 outside" \
			udp 10.213.0.255 "$p" "$host"
		for a in 10.213.0.255 255.255.255.255; do
			refused_in "loopback_remote: inside, a UDP datagram to $a:$p (the user's wildcard UDP server gets it) is refused" \
				udp "$a" "$p" "$host"
		done
		served_out "loopback_remote: control: the user's wildcard UDP server answers a datagram to ff02::1 outside" \
			udp "ff02::1%asx-d0" "$p"
		refused_in "loopback_remote: inside, a UDP datagram to [ff02::1]:$p (the user's wildcard UDP server gets it) is refused" \
			udp "ff02::1%asx-d0" "$p"
	else
		fail "loopback_remote: the user's wildcard UDP server on [::]:$p" "$(snip "$T/serve.lrb")"
	fi
	ip link del asx-d0 2>/dev/null
	ip netns del "$NETNS" 2>/dev/null && NETNS=""
}

check_root_groups() {
	local made=0
	run_in "$USR" true
	okl "root_groups: control: a launch of a user in no such group warns of none" '$(why)' \
		eval '! has "root by another name" "$ERR"'
	if ! getent group docker >/dev/null; then
		groupadd --system docker || { fail "root_groups: groupadd docker" ""; return; }
		made=1
	fi
	usermod -a -G docker "$USR"
	run_in "$USR" true
	okl "root_groups: a launch of a docker group member warns once, naming the group" '$(why)' \
		eval '[ "$(grep -c "root by another name" "$ERR")" = 1 ] && has "the docker group" "$ERR"'
	run_as "$USR" "$LAUNCHER" --status
	okl "root_groups: --status warns, naming the group" 'stdout: $(snip "$OUT")' \
		eval 'has "root by another name" "$OUT" && has "the docker group" "$OUT"'
	agent-sandbox-execd --check >"$OUT" 2>&1
	okl "root_groups: the doctor names the member and the group" 'stdout: $(snip "$OUT")' \
		has "$USR in the docker group, root by another name" "$OUT"
	gpasswd -d "$USR" docker >/dev/null
	[ "$made" = 1 ] && groupdel docker
	# sudo without a password (a NOPASSWD rule): --status runs `sudo -n true` and says so.
	run_as "$USR" "$LAUNCHER" --status
	okl "root_groups: control: --status of a user whose sudo asks a password warns of nothing" \
		'stdout: $(snip "$OUT")' eval '! has "root by another name" "$OUT"'
	printf '%s ALL=(ALL) NOPASSWD: ALL\n' "$USR" >/etc/sudoers.d/asx-doors-test
	chmod 0440 /etc/sudoers.d/asx-doors-test
	run_as "$USR" "$LAUNCHER" --status
	okl "root_groups: --status of a user with a NOPASSWD sudo rule warns, naming sudo" \
		'stdout: $(snip "$OUT")' eval 'has "root by another name" "$OUT" && has "sudo without a password" "$OUT"'
	rm -f /etc/sudoers.d/asx-doors-test
}

check_tools() {
	run_in "$USR" python3 -c 'print(6 * 7)'
	okl "tools: python3 works inside" '$(why)' has 42 "$OUT"
	fresh git
	run_as "$USR" sh -c 'cd "$1" && git init -q repo && cd repo && echo hi >f &&
		git add f && git -c user.email=a@b -c user.name=a commit -qm one' sh "$D/git"
	run_in "$USR" git clone -q "$D/git/repo" "$D/git/clone"
	okl "tools: git clone of a local repository works inside" '$(why)' \
		eval '[ "$RC" -eq 0 ] && [ "$(cat "$D/git/clone/f" 2>/dev/null)" = hi ]'
	printf 'unlisted-%s\n' "$TOK" >"$D/plain" && chmod 0644 "$D/plain"
	run_as "$USR" sh -c 'exec 3<"$1"; exec "$2" sh -c "cat <&3"' sh "$D/plain" "$LAUNCHER"
	okl "tools: an inherited descriptor of an unlisted file works" '$(why)' has "unlisted-$TOK" "$OUT"
}

# ---------------------------------------------------------------- set-up

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "running as root" "uid $(id -u)"
		return 1
	fi
	require_commands "$LAUNCHER" runuser timeout useradd userdel loginctl systemd-run busctl tmux \
		python3 ssh-agent ssh-add ssh-keygen git logger journalctl ip groupadd usermod gpasswd || return 1
}

setup() {
	T=$(mktemp -d /tmp/asx-doors.XXXXXX) || return 1
	chmod 0755 "$T"
	OUT=$T/out ERR=$T/err
	TOK=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	remove_test_user "$USR" || { echo "user $USR exists and is not a test user" >&2; return 1; }
	SETUP_DONE=1
	useradd -m -s /bin/sh -c "$GECOS" "$USR" || return 1
	USR_UID=$(id -u "$USR") UH=$(home_of "$USR")
	UENV=(env "XDG_RUNTIME_DIR=/run/user/$USR_UID" "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$USR_UID/bus")
	chmod 0755 "$UH"
	D=$T/d
	install -d -o "$USR" -g "$USR" -m 0755 "$D"
	SECRET=$UH/secret
	printf 'asx-secret-%s\n' "$TOK" >"$SECRET" && chown "$USR:$USR" "$SECRET" && chmod 0600 "$SECRET"
	set_list "$SECRET"
	loginctl enable-linger "$USR" && LINGER=1
	if ! wait_for 90 test -S "/run/user/$USR_UID/bus"; then
		echo "the user manager of $USR did not come up (no /run/user/$USR_UID/bus)" >&2
		return 1
	fi
	run_in "$USR" cat "$SECRET"
	if has "$TOK" "$OUT" || ! has "Operation not permitted" "$ERR"; then
		echo "the secret is not denied inside: $(why)" >&2
		return 1
	fi
	return 0
}

cleanup() {
	local p
	[ "$CLEANED" -eq 1 ] && return 0
	CLEANED=1
	for p in "${BG_PIDS[@]}"; do
		stop_bg "$p"
	done
	[ "$SETUP_DONE" -eq 1 ] || return 0
	if [ "${ASX_DOORS_KEEP:-0}" = 1 ]; then
		printf 'kept: user %s, %s\n' "$USR" "$T" >&2
		return 0
	fi
	if [ -n "$NETNS" ]; then
		ip link del asx-d0 2>/dev/null
		ip netns del "$NETNS" 2>/dev/null
	fi
	[ "$LINGER" = 1 ] && loginctl disable-linger "$USR"
	rm -f /etc/sudoers.d/asx-doors-test # check_root_groups
	systemctl stop "user@$USR_UID.service" 2>/dev/null
	kill_user_procs "$USR"
	for ((p = ${#MOUNTS[@]} - 1; p >= 0; p--)); do
		umount -l "${MOUNTS[p]}" 2>/dev/null
	done
	remove_test_user "$USR"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test user, user manager, list)"
