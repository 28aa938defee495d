#!/bin/bash
# shellcheck disable=SC2016,SC2088,SC2317,SC2034
# (SC2016: okl's details are expanded on failure; SC2088: list lines are literal
#  `~/...`; SC2317: check_* are called through run_check; SC2034: the counters
#  and SUITE are read by test-lib.sh)
# test-writes.sh: guest suite of write protection (issue 26): `readonly PATH` and
# `readonly DIR/` entries (readable, never changed from inside), the write protection a
# read entry gives its own file, and the user's own lists, protected from inside always.
# Runs as root in a QEMU guest with the package installed and the daemon started by
# systemd (scripts/vm-test.sh).
#
# Checks (names for ASX_WRITES_ONLY / ASX_WRITES_SKIP):
#   ro_file       `readonly ~/.bashrc`: read inside; append, sed -i (rename over), cp over,
#                 mv away, rm, truncate, chmod, touch -d, a user xattr, chattr (both ioctls)
#                 and fsverity enable all refused inside
#                 (EPERM) and reported; the same acts succeed outside
#   ro_dir        `readonly ~/.config/systemd/user/`: a new unit, a new subdirectory, a write
#                 to an existing unit, a rename within refused; reading works; an exception
#                 of the same list re-allows writing one file
#   ro_missing    `readonly ~/.profile-later` that does not exist: not planted from inside
#   ro_missing_parent  `readonly ~/.config/autostart/evil.desktop` with no autostart directory:
#                 the directory is not made from inside (the entry used to be skipped)
#   ro_symlink    `readonly ~/.zshrc`, a symlink into ~/dotfiles: neither the link nor the file
#                 it points to changes from inside (the entry used to be skipped)
#   ro_symlink_chain  `~/.zshenv -> .dots/sh/zshenv` with `~/.dots -> dotfiles`: the symlinked
#                 directory cannot be swapped; a dangling read-only link's target is not made
#   read_entry    a listed (read-denied) file: truncate, touch, chmod and a user xattr
#                 refused inside (before, only opens were)
#   own_list      the user's own list: no append, replace, removal or move from inside;
#                 with no list directory, none can be made from inside
#   own_list_link the user's list a symlink into another directory (a dotfiles manager's):
#                 the file it points to cannot be changed from inside either
#   ro_memo       the read-only walk's memos: writes in a directory first allowed are refused
#                 once it is moved below a read-only directory entry outside, and allowed again
#                 once it is moved back; a new `readonly DIR/` line is enforced where an allowed
#                 write left a memo; a write memo never answers a read (a directory entry still
#                 denies after writes there)
#   ro_receive    a descriptor of a read-only file open for writing, sent in over SCM_RIGHTS
#                 (by root: the user's outside processes cannot reach a socket made inside),
#                 is not received; one open for reading is
#
#   repo_guard    `readonly **/.git/` (the repository guard): in the user's repository, a new
#                 hook, `git config core.fsmonitor` and `core.hooksPath`, an append to
#                 .git/config, a chmod of it, commondir, a new .git/modules/NAME, moving
#                 .git/hooks or .git away, a submodule's git directory named with a `/` (its
#                 config, hooks, a new sibling, a move), a tree of modules moved in, a new .git in
#                 a directory of the user's (above the repository, beside it, a gitdir: file):
#                 all refused inside; git fetch in the submodule works; a hook planted in a repository
#                 cloned outside after the launch: refused; add, commit, checkout -b, stash work
#                 inside; `git init` and `git clone` inside work, and in that repository of the
#                 agent's, its config and hooks can be changed; outside, the user's git config works
#
#   ASX_WRITES_ONLY="name ..."  run only these checks;  ASX_WRITES_SKIP="name ..."  skip these
# Prints PASS:/FAIL:/SKIP: lines; ends with ALL PASS or N FAILED (exit 1).

set -u -o pipefail
umask 022
export LC_ALL=C
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-writes.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-wr
readonly GECOS="agent-sandbox-exec writes test user"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist

CHECKS=(ro_file ro_dir ro_missing ro_missing_parent ro_symlink ro_symlink_chain read_entry own_list own_list_link ro_memo ro_receive repo_guard)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_WRITES # run_check: ASX_WRITES_ONLY / ASX_WRITES_SKIP choose the checks
CMD_TIMEOUT=60
T="" OUT="" ERR="" RC=0 UH="" CLEANED=0

# set_list LINE...: the user's list, written outside (line 1 a comment)
set_list() {
	runuser -u "$USR" -- mkdir -p "$UH/.config/agent-sandbox-exec" &&
		printf '%s\n' "# $SUITE" "$@" | runuser -u "$USR" -- tee "$UH/$HOME_LIST_REL" >/dev/null
}

# PY_ACTS FILE: each change of FILE a tool may make, one "<act>: <result>" line each
PY_ACTS='import fcntl, os, shutil, struct, subprocess, sys
f = sys.argv[1]
def act(name, fn):
    try:
        fn()
        print(name + ": done")
    except OSError as e:
        print(name + ": " + (e.strerror or str(e)))
def append():
    with open(f, "a") as o:
        o.write("cat ~/.ssh/id_ed25519 > /tmp/k\n")
def sed_i():
    r = subprocess.run(["sed", "-i", "s/^/#/", f], capture_output=True, text=True)
    if "Operation not permitted" in r.stderr:
        raise PermissionError(1, "Operation not permitted")
    if r.returncode:
        raise OSError(r.returncode, r.stderr.strip() or "sed failed")
def cp_over():
    open(f + ".new", "w").write("planted\n")
    os.rename(f + ".new", f)
def truncate():
    os.truncate(f, 0)
def chmod():
    os.chmod(f, 0o777)
def touch():
    os.utime(f, (0, 0))
def xattr():
    os.setxattr(f, "user.asx", b"1")
def rmxattr():
    os.removexattr(f, "user.asx")
def ioctl_ro(cmd, arg):
    fd = os.open(f, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, cmd, arg)
    finally:
        os.close(fd)
def chattr():
    fd = os.open(f, os.O_RDONLY)
    try:
        old = struct.unpack("l", fcntl.ioctl(fd, 0x80086601, struct.pack("l", 0)))[0]
    finally:
        os.close(fd)
    ioctl_ro(0x40086602, struct.pack("l", old | 0x40))
def fsxattr():
    fd = os.open(f, os.O_RDONLY)
    try:
        cur = fcntl.ioctl(fd, 0x801c581f, bytes(28))
    finally:
        os.close(fd)
    ioctl_ro(0x401c5820, cur)
def verity():
    ioctl_ro(0x40806685, struct.pack("III", 1, 1, 4096) + bytes(116))
def file_setattr():
    # file_getattr(2)/file_setattr(2) (x86_64 468/469, Linux 6.17): struct file_attr, 24 bytes;
    # FS_XFLAG_NODUMP (0x80) needs no capability
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(24)
    if libc.syscall(468, -100, f.encode(), attr, 24, 0) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    flags = struct.unpack_from("Q", attr.raw)[0] | 0x80
    struct.pack_into("Q", attr, 0, flags)
    if libc.syscall(469, -100, f.encode(), attr, 24, 0) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
act("append", append)
act("sed-i", sed_i)
act("cp-over", cp_over)
act("truncate", truncate)
act("chmod", chmod)
act("touch", touch)
act("xattr", xattr)
act("rmxattr", rmxattr)
act("chattr", chattr)
act("fsxattr", fsxattr)
act("verity", verity)
act("file-setattr", file_setattr)
act("link", lambda: os.link(f, f + ".ln"))
act("mv", lambda: os.rename(f, f + ".moved"))
act("rm", lambda: os.unlink(f))'

# PY_ACL set|rm FILE: set an extended POSIX ACL (a named user entry: root may read), or remove it
PY_ACL='import os, struct, sys
n = "system.posix_acl_access"
if sys.argv[1] == "set":
    os.setxattr(sys.argv[2], n, struct.pack("<I" + "HHI" * 5, 2, 1, 6, 0xffffffff, 2, 4, 0,
                4, 4, 0xffffffff, 0x10, 4, 0xffffffff, 0x20, 4, 0xffffffff))
else:
    os.removexattr(sys.argv[2], n)'

# refused ACT...: each "<act>: Operation not permitted" is in $OUT; those that are not,
# with what happened, in $NOT_REFUSED
NOT_REFUSED=""
refused() {
	local a
	NOT_REFUSED=""
	for a in "$@"; do
		grep -qx "$a: Operation not permitted" "$OUT" ||
			NOT_REFUSED+="$(grep -m1 "^$a: " "$OUT" || echo "$a: (no result)"); "
	done
	[ -z "$NOT_REFUSED" ]
}

check_ro_file() {
	local f=$UH/.bashrc
	run_as "$USR" sh -c 'echo "# the user" >"$1"' sh "$f"
	set_list "readonly ~/.bashrc"
	run_in "$USR" cat "$f"
	okl "ro_file: a read-only file is read inside" '$(why)' has "# the user" "$OUT"
	run_in "$USR" python3 -c "$PY_ACTS" "$f"
	okl "ro_file: append, sed -i, a rename over, truncate, chmod, utime, setxattr, chattr (FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR), fsverity enable, link, mv, rm: all refused inside" \
		'not refused: $NOT_REFUSED' refused append sed-i cp-over truncate chmod touch xattr rmxattr chattr fsxattr verity link mv rm
	if grep -qx "file-setattr: Function not implemented" "$OUT"; then
		skip "ro_file: file_setattr(2): not in this kernel (Linux 6.17 and later have it; the 7.x guest runs it)"
	else
		okl "ro_file: file_setattr(2) of its attribute flags refused inside" \
			'not refused: $NOT_REFUSED' refused file-setattr
	fi
	okl "ro_file: the file is unchanged" '$(snip "$f")' eval '[ "$(cat "$f")" = "# the user" ]'
	run_as "$USR" "$LAUNCHER" --denials --json
	okl "ro_file: the write-open is reported with its read-only line" '$(snip "$OUT")' \
		eval 'grep -q "\"op\":\"write-open\"" "$OUT" && grep -q "denylist:2\"" "$OUT"'
	run_as "$USR" sh -c 'echo x >"$1" && python3 -c "$2" "$1"' sh "$f.out" "$PY_ACTS"
	okl "ro_file: control: the same acts succeed on a file no entry names (outside)" '$(snip "$OUT")' \
		eval '! grep -q "Operation not permitted" "$OUT" && grep -qx "append: done" "$OUT"'
	run_as "$USR" sh -c 'echo outside >>"$1"' sh "$f"
	okl "ro_file: outside a sandbox the user's shell still writes it" '$(why)' \
		eval '[ "$RC" -eq 0 ] && has outside "$f"'
	# An extended ACL set outside, removed inside (since Linux 6.2 the removal reaches the
	# remove_acl hook, not removexattr's).
	run_as "$USR" python3 -c "$PY_ACL" set "$f"
	okl "ro_file: control: outside, the user sets an ACL on it" '$(why)' test "$RC" -eq 0
	run_in "$USR" python3 -c "$PY_ACL" rm "$f"
	okl "ro_file: removing its ACL is refused inside" '$(why)' \
		eval '[ "$RC" -ne 0 ] && has "Operation not permitted" "$ERR"'
}

check_ro_dir() {
	local d=$UH/.config/systemd/user
	run_as "$USR" mkdir -p "$d"
	run_as "$USR" sh -c 'echo "[Unit]" >"$1/a.service"; echo ok >"$1/ok.service"' sh "$d"
	set_list "readonly ~/.config/systemd/user/" "!~/.config/systemd/user/ok.service"
	run_in "$USR" sh -c 'cat "$1/a.service"
		echo "[Service]" >"$1/x.service" 2>/dev/null || echo "new: refused"
		mkdir "$1/sub" 2>/dev/null || echo "mkdir: refused"
		echo ExecStart=x >>"$1/a.service" 2>/dev/null || echo "write: refused"
		mv "$1/a.service" "$1/b.service" 2>/dev/null || echo "mv: refused"
		ln -s /tmp/x "$1/l.service" 2>/dev/null || echo "symlink: refused"
		echo more >>"$1/ok.service" && echo "exception: written"' sh "$d"
	okl "ro_dir: reading below a read-only directory entry works" '$(snip "$OUT")' has "[Unit]" "$OUT"
	okl "ro_dir: a new unit, a subdirectory, a write, a rename and a symlink below it are refused" \
		'$(snip "$OUT")' acts_are refused new mkdir write mv symlink
	okl "ro_dir: nothing was made or changed there" '$(ls -A "$d" | tr "\n" " ")' \
		eval '[ ! -e "$d/x.service" ] && [ ! -e "$d/sub" ] && [ "$(cat "$d/a.service")" = "[Unit]" ]'
	okl "ro_dir: an exception of the same list re-allows writing its file" '$(snip "$OUT")' \
		has "exception: written" "$OUT"
	run_as "$USR" sh -c 'echo "[Service]" >"$1/x.service"' sh "$d"
	okl "ro_dir: control: outside, a new unit is made" '$(why)' test -e "$d/x.service"
}

check_ro_missing() {
	set_list "readonly ~/.profile-later"
	run_in "$USR" sh -c 'echo planted >"$1"' sh "$UH/.profile-later"
	okl "ro_missing: a read-only name that does not exist is not planted from inside" '$(why)' \
		eval 'has "Operation not permitted" "$ERR" && [ ! -e "$UH/.profile-later" ]'
}

check_ro_missing_parent() {
	rm -rf "$UH/.config/autostart"
	set_list "readonly ~/.config/autostart/evil.desktop"
	run_in "$USR" sh -c 'mkdir -p "$1" && echo "[Desktop Entry]" >"$1/evil.desktop"' sh \
		"$UH/.config/autostart"
	okl "ro_missing_parent: a read-only file's missing directory is not made from inside" '$(why)' \
		eval 'has "Operation not permitted" "$ERR" && [ ! -e "$UH/.config/autostart" ]'
	run_in "$USR" mkdir "$UH/.config/other"
	okl "ro_missing_parent: control: another directory next to it is made inside" '$(why)' \
		test -d "$UH/.config/other"
	run_as "$USR" mkdir -p "$UH/.config/autostart"
	okl "ro_missing_parent: control: outside, the user makes it" '$(why)' test -d "$UH/.config/autostart"
	rm -rf "$UH/.config/other" "$UH/.config/autostart"
}

check_ro_symlink() {
	local dots=$UH/dotfiles f=$UH/.zshrc
	run_as "$USR" mkdir -p "$dots"
	run_as "$USR" sh -c 'echo "# the user" >"$1/zshrc" && ln -sfn "$1/zshrc" "$2"' sh "$dots" "$f"
	set_list "readonly ~/.zshrc"
	run_in "$USR" python3 -c "$PY_ACTS" "$f"
	okl "ro_symlink: a read-only symlink (a dotfiles manager's): append, sed -i, truncate, mv, rm through it refused inside" \
		'not refused: $NOT_REFUSED' refused append sed-i truncate mv rm
	run_in "$USR" python3 -c "$PY_ACTS" "$dots/zshrc"
	okl "ro_symlink: the file it points to, by its own name: refused too" \
		'not refused: $NOT_REFUSED' refused append sed-i cp-over truncate mv rm
	okl "ro_symlink: the link and the file are unchanged" '$(snip "$dots/zshrc")' \
		eval '[ -L "$f" ] && [ "$(cat "$f")" = "# the user" ]'
	run_as "$USR" sh -c 'echo "# outside" >>"$1"' sh "$f"
	okl "ro_symlink: control: outside, the user edits it through the link" '$(why)' \
		has "# outside" "$dots/zshrc"
}

check_ro_symlink_chain() {
	local dots=$UH/dotfiles
	run_as "$USR" mkdir -p "$dots/sh"
	run_as "$USR" sh -c 'echo "# env" >"$1/sh/zshenv" && ln -sfn dotfiles "$2/.dots" &&
		ln -sfn .dots/sh/zshenv "$2/.zshenv" && ln -sfn "$1/later/zlogin" "$2/.zlogin"' sh "$dots" "$UH"
	set_list "readonly ~/.zshenv" "readonly ~/.zlogin"
	# A symlinked directory in the link's target, swapped for one of the agent's.
	run_in "$USR" sh -c 'rm "$1/.dots" && mkdir "$1/.dots" && mkdir "$1/.dots/sh" &&
		echo evil >"$1/.dots/sh/zshenv"' sh "$UH"
	okl "ro_symlink_chain: a symlinked directory on the way to a read-only file cannot be swapped inside" \
		'$(why)' eval 'has "Operation not permitted" "$ERR" && [ -L "$UH/.dots" ] &&
			[ "$(cat "$UH/.zshenv")" = "# env" ]'
	run_in "$USR" ln -sfn /tmp "$UH/.dots"
	okl "ro_symlink_chain: nor pointed elsewhere (ln -sfn)" '$(why)' \
		eval '[ "$RC" -ne 0 ] && [ "$(readlink "$UH/.dots")" = dotfiles ]'
	# A read-only symlink whose target does not exist yet: the target is not made inside.
	run_in "$USR" sh -c 'mkdir -p "$1/later" && echo evil >"$2"' sh "$dots" "$UH/.zlogin"
	okl "ro_symlink_chain: a dangling read-only link's target (and its directory) is not made inside" \
		'$(why)' eval 'has "Operation not permitted" "$ERR" && [ ! -e "$dots/later" ]'
	run_as "$USR" sh -c 'mkdir -p "$1/later" && echo "# login" >"$2"' sh "$dots" "$UH/.zlogin"
	okl "ro_symlink_chain: control: outside, the user makes it through the link" '$(why)' \
		has "# login" "$dots/later/zlogin"
	rm -f "$UH/.dots" "$UH/.zshenv" "$UH/.zlogin"
}

check_read_entry() {
	local f=$UH/.ssh/id_ed25519
	set_list "~/.ssh/id_ed25519"
	run_in "$USR" python3 -c "$PY_ACTS" "$f"
	okl "read_entry: a listed file's truncate, chmod, utime and xattr are refused inside" 'not refused: $NOT_REFUSED' \
		refused truncate chmod touch xattr rmxattr
	okl "read_entry: the key is intact" '$(snip "$f")' eval '[ "$(cat "$f")" = "key" ]'
}

check_own_list() {
	local list=$UH/$HOME_LIST_REL
	set_list "~/.ssh/id_ed25519"
	run_in "$USR" python3 -c "$PY_ACTS" "$list"
	okl "own_list: the user's list cannot be appended to, replaced, moved or removed inside" \
		'not refused: $NOT_REFUSED' refused append sed-i cp-over truncate link mv rm
	okl "own_list: the list is unchanged" '$(snip "$list")' eval '! has "/tmp/k" "$list" && ! has planted "$list"'
	run_in "$USR" sh -c 'mv "$1" "$1.old"' sh "$(dirname "$list")"
	okl "own_list: its directory cannot be moved away inside" '$(why)' has "Operation not permitted" "$ERR"
	# No list at all: the directory cannot be made from inside (a planted list would apply at
	# the user's next launch from outside).
	rm -rf "$UH/.config/agent-sandbox-exec"
	run_in "$USR" sh -c 'mkdir -p "$1" && echo "socket tcp:22" >"$1/denylist"' sh "$(dirname "$list")"
	okl "own_list: with no list, none can be planted from inside" '$(why)' \
		eval 'has "Operation not permitted" "$ERR" && [ ! -e "$list" ]'
	run_as "$USR" mkdir -p "$(dirname "$list")"
	okl "own_list: control: outside, the user makes it" '$(why)' test -d "$(dirname "$list")"
}

check_own_list_link() {
	local list=$UH/$HOME_LIST_REL dots=$UH/dotfiles
	run_as "$USR" mkdir -p "$dots"
	runuser -u "$USR" -- sh -c 'printf "%s\n" "~/.ssh/id_ed25519" >"$1" && ln -sf "$1" "$2"' sh \
		"$dots/denylist" "$list"
	run_in "$USR" python3 -c "$PY_ACTS" "$dots/denylist"
	okl "own_list_link: the file a symlinked list points to cannot be changed inside" \
		'not refused: $NOT_REFUSED' refused append sed-i cp-over truncate mv rm
	okl "own_list_link: it is unchanged" '$(snip "$dots/denylist")' eval '! has "/tmp/k" "$dots/denylist"'
	run_as "$USR" sh -c 'echo "# outside" >>"$1"' sh "$dots/denylist"
	okl "own_list_link: control: outside, the user edits it" '$(why)' has "# outside" "$dots/denylist"
	rm -f "$list"
}

# PY_RECV SOCK UP: a listener that receives one descriptor per connection, twice, and prints
# "got" or "nofd" for each
PY_RECV='import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(2)
open(sys.argv[2], "w").write("up\n")
for _ in range(2):
    c, _ = s.accept()
    msg, fds, flags, _ = socket.recv_fds(c, 16, 4)
    print("got" if fds else "nofd", flush=True)'
# PY_SEND SOCK FILE MODE: send a descriptor of FILE opened with MODE (r or rw)
PY_SEND='import os, socket, sys
fd = os.open(sys.argv[2], os.O_RDWR if sys.argv[3] == "rw" else os.O_RDONLY)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
socket.send_fds(s, [b"x"], [fd])
print("sent")'

# WRITES_IN DIR: inside, in DIR, an append to f, a new file, the removal of g, each
# "<act>: ok" or "<act>: refused" (sh -c "$WRITES_IN" sh DIR; memo_files makes f and g first)
# shellcheck disable=SC2016 # the sandboxed shell expands them
WRITES_IN='cd "$1" || exit 1
	if echo more >>f 2>/dev/null; then echo "append: ok"; else echo "append: refused"; fi
	if echo n >new 2>/dev/null; then echo "create: ok"; else echo "create: refused"; fi
	if rm -f g 2>/dev/null && [ ! -e g ]; then echo "rm: ok"; else echo "rm: refused"; fi
	rm -f new 2>/dev/null'

# memo_files DIR: outside, as the user, f and g in DIR (what WRITES_IN writes and removes)
memo_files() { run_as "$USR" sh -c 'echo x >"$1/f" && echo y >"$1/g"' sh "$1"; }

# acts_are RESULT ACT...: each "<ACT>: RESULT" line is in $OUT
# SH_TRY: `try NAME CMD...` prints "NAME: done", or "NAME: refused" when CMD fails with EPERM
# (its stderr says "Operation not permitted"), else "NAME: failed: <stderr>"
SH_TRY='try() {
	n=$1
	shift
	if e=$("$@" 2>&1 >/dev/null); then echo "$n: done"
	elif printf "%s" "$e" | grep -q "Operation not permitted"; then echo "$n: refused"
	else echo "$n: failed: $(printf "%s" "$e" | tr "\n" " ")"; fi
}'

check_repo_guard() {
	local r=$UH/repos id="-c user.email=u@example.org -c user.name=u"
	# The user's repository, with the git directory of a submodule named with a `/` (as git
	# names one after its path) and an empty directory of the user's.
	run_as "$USR" sh -c 'rm -rf "$1" && mkdir -p "$1/plain" && cd "$1" && git init -q src &&
		git -C src $2 commit -q --allow-empty -m init && git clone -q src mine &&
		git clone -q --bare src mine/.git/modules/third_party/lib &&
		git -C src $2 commit -q --allow-empty -m two' sh "$r" "$id"
	okl "repo_guard: control: outside, the user clones a repository" '$(why)' test -d "$r/mine/.git/hooks"
	set_list "readonly **/.git/"
	run_in "$USR" sh -c "$SH_TRY"'
		cd "$1/mine" || exit 1
		try hook sh -c "echo cat ~/.ssh/id_ed25519 >.git/hooks/pre-commit"
		try fsmonitor git config core.fsmonitor "cat ~/.ssh/id_ed25519"
		try hookspath git config core.hooksPath /tmp
		try append sh -c "echo [core] >>.git/config"
		try chmod chmod 600 .git/config
		try commondir sh -c "echo /tmp/evil >.git/commondir"
		try module mkdir -p .git/modules/x
		try hooks-mv mv .git/hooks .git/hooks.old
		try git-mv mv .git .git.old
		try sub-config sh -c "echo [core] >>.git/modules/third_party/lib/config"
		try sub-hook sh -c "echo x >.git/modules/third_party/lib/hooks/post-checkout"
		try sub-plant mkdir .git/modules/third_party/other
		try sub-mv mv .git/modules/third_party .git/modules/tp
		try modules-plant sh -c "mkdir -p .git/m/lib && mv .git/m .git/modules2 && mv .git/modules2 .git/modules/x"
		try git-above git init -q ..
		try git-plain git init -q ../plain
		try git-file sh -c "echo gitdir: /tmp/evil >../plain/.git"
		try fetch-sub git -C .git/modules/third_party/lib fetch -q "$1/src"
		try commit sh -c "echo a >f && git add f && git $2 commit -q -m add"
		try branch git checkout -q -b topic
		try stash sh -c "echo b >>f && git stash -q && git stash pop -q"
		try init git init -q ../fresh
		try clone git clone -q ../src ../agents
		cd ../agents || exit 1
		try own-config git config core.fsmonitor true
		try own-hook sh -c "echo true >.git/hooks/pre-commit"' sh "$r" "$id"
	okl "repo_guard: in the user's repository a new hook, core.fsmonitor, core.hooksPath, an append to .git/config, its chmod, commondir, a new module, moving hooks or .git: all refused inside" \
		'$(snip "$OUT") $(snip "$ERR")' acts_are refused hook fsmonitor hookspath append chmod commondir module hooks-mv git-mv
	okl "repo_guard: a submodule's git directory named with a /: its config, a hook, a new sibling, moving it, and a tree of modules moved in: refused inside" \
		'$(snip "$OUT")' acts_are refused sub-config sub-hook sub-plant sub-mv modules-plant
	okl "repo_guard: no .git (directory or gitdir: file) in a directory of the user's, above the repository or beside it" \
		'$(snip "$OUT")' acts_are refused git-above git-plain git-file
	okl "repo_guard: git fetch into the submodule's git directory works inside" '$(snip "$OUT")' \
		acts_are "done" fetch-sub
	okl "repo_guard: add, commit, checkout -b and stash work inside" '$(snip "$OUT")' \
		acts_are "done" commit branch stash
	okl "repo_guard: git init and git clone work inside, and the agent's own clone's config and hooks are its to change" \
		'$(snip "$OUT")' acts_are "done" init clone own-config own-hook
	okl "repo_guard: the user's repository is unchanged where it matters" '$(ls -A "$r/mine/.git/hooks" | tr "\n" " ")' \
		eval '[ ! -e "$r/mine/.git/hooks/pre-commit" ] && ! grep -q fsmonitor "$r/mine/.git/config" && [ -d "$r/mine/.git" ]'
	# A repository cloned outside while the sandbox runs: guarded as well.
	run_in_after "$USR" "runuser -u $USR -- git clone -q $r/src $r/later >/dev/null 2>&1" \
		sh -c "$SH_TRY"'; try later-hook sh -c "echo x >$1/later/.git/hooks/post-checkout"' sh "$r"
	okl "repo_guard: a hook planted in a repository cloned after the launch is refused" \
		'$(snip "$OUT") $(snip "$ERR")' acts_are refused later-hook
	run_as "$USR" git -C "$r/mine" config core.fsmonitor false
	okl "repo_guard: control: outside, the user changes the repository's config" '$(why)' \
		has fsmonitor "$r/mine/.git/config"
}

acts_are() {
	local want=$1 a
	shift
	for a in "$@"; do
		grep -qx "$a: $want" "$OUT" || return 1
	done
}

check_ro_memo() {
	local m=$UH/memo
	run_as "$USR" sh -c 'rm -rf "$1" && mkdir -p "$1/ro" "$1/free/a" "$1/sec/b" && echo s >"$1/sec/b/s"' sh "$m"
	memo_files "$m/free/a"
	set_list "readonly ~/memo/ro/" "~/memo/sec/"
	# Writes first (the memos of free/a and sec/b hold the read-only walk's part), then reads.
	run_in "$USR" sh -c "$WRITES_IN"'; cd "$2" && { echo n >new; rm -f new; cat s; }' sh "$m/free/a" "$m/sec/b"
	okl "ro_memo: in a free directory, append, create and rm work inside" '$(snip "$OUT")' \
		acts_are ok append create rm
	okl "ro_memo: a write memo never answers a read: a directory entry still denies after writes there" \
		'$(snip "$OUT") $(snip "$ERR")' eval 'has "Operation not permitted" "$ERR" && ! grep -qx s "$OUT"'
	mv "$m/free/a" "$m/ro/a"
	memo_files "$m/ro/a"
	run_in "$USR" sh -c "$WRITES_IN" sh "$m/ro/a"
	okl "ro_memo: the same directory moved below a read-only entry outside: append, create, rm refused" \
		'$(snip "$OUT")' acts_are refused append create rm
	mv "$m/ro/a" "$m/free/a"
	run_in "$USR" sh -c "$WRITES_IN" sh "$m/free/a"
	okl "ro_memo: moved back outside: writes work again" '$(snip "$OUT")' acts_are ok append create rm
	memo_files "$m/free/a"
	set_list "readonly ~/memo/ro/" "~/memo/sec/" "readonly ~/memo/free/"
	run_in "$USR" sh -c "$WRITES_IN" sh "$m/free/a"
	okl "ro_memo: a new readonly line over a directory whose memo allowed writes: refused" \
		'$(snip "$OUT")' acts_are refused append create rm
	rm -rf "$m"
}

check_ro_receive() {
	local d=$T/rx f=$UH/.bashrc
	install -d -o "$USR" -g "$USR" -m 0755 "$d"
	run_as "$USR" sh -c 'echo "# the user" >"$1"' sh "$f"
	set_list "readonly ~/.bashrc"
	timeout -k 5 60 runuser -u "$USR" -- "$LAUNCHER" python3 -c "$PY_RECV" "$d/sock" "$d/up" \
		</dev/null >"$d/out" 2>"$d/err" &
	local rpid=$!
	if ! wait_for 30 test -s "$d/up"; then
		fail "ro_receive: a sandboxed receiver listens" "$(snip "$d/err")"
		return
	fi
	run_as root python3 -c "$PY_SEND" "$d/sock" "$f" rw
	run_as root python3 -c "$PY_SEND" "$d/sock" "$f" r
	wait_for 20 pid_gone "$rpid"
	okl "ro_receive: a writable descriptor of a read-only file is not received inside; a read-only one is" \
		'receiver: $(snip "$d/out") $(snip "$d/err")' eval '[ "$(tr "\n" " " <"$d/out")" = "nofd got " ]'
}

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "running as root" "uid $(id -u)"
		return 1
	fi
	require_commands "$LAUNCHER" python3 sed || return 1
}

setup() {
	T=$(mktemp -d /tmp/asx-wr.XXXXXX) || return 1
	chmod 0755 "$T"
	OUT=$T/out ERR=$T/err
	remove_test_user "$USR" || { echo "user $USR exists and is not a test user" >&2; return 1; }
	useradd -m -s /bin/sh -c "$GECOS" "$USR" || return 1
	UH=$(home_of "$USR")
	runuser -u "$USR" -- mkdir -p "$UH/.ssh" &&
		runuser -u "$USR" -- sh -c 'echo key >"$1"' sh "$UH/.ssh/id_ed25519" || return 1
	wait_for 300 test -s /run/agent-sandbox-exec/ready || { echo "the daemon is not serving" >&2; return 1; }
}

cleanup() {
	[ "$CLEANED" -eq 1 ] && return 0
	CLEANED=1
	remove_test_user "$USR"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test user, daemon)"
