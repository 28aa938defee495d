#!/bin/bash
# shellcheck disable=SC2016,SC2088,SC2317,SC2034
# (SC2016: okl's details and the sandboxed shells' texts are expanded later; SC2088: list
#  lines are literal `~/...`; SC2317: check_* are called through run_check; SC2034: the
#  counters and SUITE are read by test-lib.sh)
# test-patterns.sh: guest suite of name patterns (issue 25): `**/NAME` and `DIR/NAME` lines
# with `*` and `?`, matched live by the hooks against the name a file has, whenever it got it.
# Runs as root in a QEMU guest with the package installed and the daemon started by systemd
# (scripts/vm-test.sh).
#
# Checks (names for ASX_PATTERNS_ONLY / ASX_PATTERNS_SKIP):
#   live        `**/.env`, `**/.env.*`, `!**/.env.example`, `**/*.pem`, `~/.ssh/id_*`: files
#               that exist at launch, and files given a covered name after the launch by the
#               user outside (a `git clone`, a `git checkout`, a rename, a new file, `.ENV`),
#               are denied inside a sandbox that was already running; `.env.example`, a
#               `.pub` next to the keys and unrelated files stay readable
#   moves       inside: `mv .env env.txt`, `ln .env ../x`, an append or overwrite of `.env`,
#               a rename, link or symlink onto a covered name: refused (EPERM) and nothing
#               changed; a new `.env.local` or `key.pem` is written by the open that creates
#               it and never read or reopened inside; `.env.example` is written; the same acts
#               succeed outside
#   lists       a base-list pattern is not excepted by the user's list; a user's exception of
#               the user's own pattern is; a pattern exception re-allows a file below a
#               directory entry of the same list, and no denied file is linked or renamed to
#               such a name from inside; a new exception reaches a running sandbox
#               from an outside launch only (one from inside is held back)
#   filesystems a covered name on tmpfs, overlayfs, xfs and btrfs (when their tools are
#               there), made after the launch
#   deep        `~/projects/**/terraform.tfstate*`: the name at any depth below the
#               directory, made after the launch, is denied; outside it read; no directory moves
#               out of or into it (nor it) from inside, one within it does; no symlink is made
#               below it; a covered name deeper than the walk's 64 levels is denied
#   casefold    in an ext4 casefold directory: a covered name asked in another case or with a
#               Unicode spelling that folds to it (KELVIN SIGN for k) is denied; other names read
#   defaults    the shipped defaults (/etc/agent-sandbox-exec/defaults: the recommended
#               catalogue) protect a user with no list (a cloud token, gh's token, an ssh key,
#               a .env cloned and a .pem written after the launch), leave templates, known_hosts
#               and .pub readable and git working; startup files, user units, autostart
#               entries, ~/.local/bin and ~/.gitconfig unwritable inside (written outside), tools'
#               own directories below ~/.config and ~/.local makeable; the user's exception,
#               `defaults off GROUP` and `defaults off` take effect (the last says it protects less);
#               a misspelt group is warned about
#   claims      the rest of README's "What a fresh install protects", with the shipped
#               defaults: in a repository made outside (its remote a bare repository) add,
#               commit, checkout, rebase, stash, fetch, pull and push work inside; git config,
#               remote add, branch -u, a new tracking branch and submodule update --init fail
#               and push -u records no upstream (.git/config unchanged), git init and git clone
#               URL . in a directory made outside fail (a repository made inside stays the
#               agent's); .env.sample, .env.template, cacert.pem and ca-bundle.pem readable
#               (.env.local and server.pem not); ~/.zshrc, fish's config.fish, ~/.vimrc,
#               ~/.tmux.conf, authorized_keys, environment.d, ~/.config/git/config, ~/bin and
#               known_hosts unwritable inside (written outside); `defaults off local-bin` and
#               `defaults off git-repositories` let ~/.local/bin and git config be written;
#               --check lists the defaults under "the shipped defaults" and names a misspelt
#               group; a plain-path exception (`!~/app/.env`) does not except a pattern's
#               match and `!~/.npmrc` no file line, while `!**/.env.local` re-allows
#   tools       with the shipped defaults: `ssh -T` to this host through the user's ssh-agent
#               works inside once the list has `socket $SSH_AUTH_SOCK` (not before; the key
#               file stays denied), and adds no new host to known_hosts there (ssh outside
#               does); `python3 -m venv` and `pip install` work inside while the pip.conf with
#               an index token is denied (pip ignores it)
#   check       `--check` shows each pattern as live, with what it matches now, and no
#               "glob characters" mistake; bad pattern lines are warned about
#   workflow    with the patterns on: `git init`, `add`, `commit`, `checkout -b`, `stash`
#               inside a repository that has an `.env.example` work
#
#   ASX_PATTERNS_ONLY="name ..."  run only these checks;  ASX_PATTERNS_SKIP="name ..."  skip
# Prints PASS:/FAIL:/SKIP: lines; ends with ALL PASS or N FAILED (exit 1).

set -u -o pipefail
umask 022
export LC_ALL=C
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-patterns.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-pat
readonly GECOS="agent-sandbox-exec patterns test user"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist
readonly BASE_LIST=/etc/agent-sandbox-exec/denylist

CHECKS=(live moves lists filesystems deep casefold defaults claims tools check workflow)

PASS_N=0 FAIL_N=0 SKIP_N=0 MOUNTS=() LOOPS=()

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_PATTERNS
CMD_TIMEOUT=120
T="" OUT="" ERR="" RC=0 UH="" CLEANED=0 BASE_SAVED="" CLAIMS_HOME=""

# The usual lines of this suite's lists.
LINES=("**/.env" "**/.env.*" "!**/.env.example" "**/*.pem" "~/.ssh/id_*" "!~/.ssh/id_*.pub")

# as_user CMD...: run a shell command line as the test user, outside, in its home
as_user() { runuser -u "$USR" -- sh -c "cd && $1"; }

# reads FILE...: inside the sandbox, "<file>: ok" or "<file>: <error>" for a read of each
READS='for f in "$@"; do if out=$(cat "$f" 2>&1); then echo "$f: ok"; else echo "$f: ${out##*: }"; fi; done'

# read_as RESULT NAME...: each "<NAME>: RESULT" line of READS is in $OUT (else in $BAD)
BAD=""
read_as() {
	local want=$1 n
	shift
	BAD=""
	for n in "$@"; do
		grep -qx -- "$n: $want" "$OUT" || BAD+="$(grep -m1 -- "^$n: " "$OUT" || echo "$n: (none)"); "
	done
	[ -z "$BAD" ]
}
# denied NAME...: each read was refused (EPERM); readable NAME...: each read worked
# WRITES_INSIDE: in the home, each write of code that runs later, "<name>: ok" or "<name>: refused"
# (a sandboxed shell runs it: sh -c "cd && $WRITES_INSIDE")
# shellcheck disable=SC2016 # the sandboxed shell expands them
WRITES_INSIDE='t() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n: ok"; else echo "$n: refused"; fi; }
	t bashrc sh -c "echo x >>.bashrc"
	t aliases sh -c "echo x >>.bash_aliases"
	t usersite sh -c "mkdir -p .local/lib/python3/site-packages && echo >.local/lib/python3/site-packages/x.pth"
	t userconf sh -c "mkdir -p .config/systemd && echo >.config/systemd/user.conf"
	t profile sed -i s/PATH/PATH/ .profile
	t unit sh -c "mkdir -p .config/systemd/user && echo >.config/systemd/user/x.service"
	t autostart sh -c "mkdir -p .config/autostart && echo >.config/autostart/x.desktop"
	t shim sh -c "mkdir -p .local/bin && echo >.local/bin/git"
	t gitconfig git config --global core.fsmonitor "cat .ssh/id_ed25519"
	t tooldirs sh -c "mkdir -p .config/tool .local/share/tool .local/state/tool && echo >.config/tool/x && echo >.local/share/tool/x && echo >.local/state/tool/x"'
# WRITES_MORE: the same for the other files of the startup, git-config and local-bin groups
# and ssh's known_hosts (check_claims makes .zshrc, config.fish, .tmux.conf, authorized_keys,
# known_hosts and an empty ~/.config/git first; .vimrc, environment.d and ~/bin are missing)
# shellcheck disable=SC2016 # the sandboxed shell expands them
WRITES_MORE='t() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n: ok"; else echo "$n: refused"; fi; }
	t zshrc sh -c "echo x >>.zshrc"
	t fish sh -c "echo x >>.config/fish/config.fish"
	t vimrc sh -c "echo x >.vimrc"
	t tmux sh -c "echo x >.tmux.conf.new && mv .tmux.conf.new .tmux.conf"
	t authkeys sh -c "echo x >>.ssh/authorized_keys"
	t envd sh -c "mkdir -p .config/environment.d && echo X=1 >.config/environment.d/x.conf"
	t gitxdg git config --file .config/git/config asx.xdg yes
	t bin sh -c "mkdir -p bin && echo >bin/x"
	t knownhosts sh -c "echo x >>.ssh/known_hosts"'

denied() { read_as "Operation not permitted" "$@"; }
readable() { read_as ok "$@"; }

check_live() {
	local r=$UH/repo
	as_user 'rm -rf repo src.git src && mkdir -p repo src .ssh && cd repo && echo A=1 >.env &&
		echo A= >.env.example && echo x >main.rs && cd && echo k >.ssh/id_old && echo p >.ssh/id_old.pub &&
		git init -q src && cd src && echo SECRET=1 >.env && git add .env &&
		git -c user.email=t@t -c user.name=t commit -qm env && git checkout -q -b other &&
		echo B=2 >.env.production && git add .env.production &&
		git -c user.email=t@t -c user.name=t commit -qm prod && git checkout -q -' >/dev/null 2>&1
	set_list "${LINES[@]}"
	# A sandbox that was running before any of these names was made or given.
	run_in_after "$USR" 'as_user "git clone -q src clone && cd src && git checkout -q other &&
		cd ../repo && echo c >config.txt && mv config.txt .env.staging && echo E >.ENV &&
		echo k >tls.pem && cd && echo k2 >.ssh/id_new" >/dev/null 2>&1' \
		sh -c "cd && $READS" sh repo/.env repo/.env.example repo/main.rs clone/.env \
		src/.env.production repo/.env.staging repo/.ENV repo/tls.pem .ssh/id_old .ssh/id_new \
		.ssh/id_old.pub
	okl "live: files of covered names made before the launch are denied" 'not denied: $BAD' \
		denied repo/.env .ssh/id_old
	okl "live: a clone, a checkout, a rename, a new file and an upper-case name made after the launch, outside, are denied inside" \
		'not denied: $BAD' denied clone/.env src/.env.production repo/.env.staging repo/.ENV \
		repo/tls.pem .ssh/id_new
	okl "live: an excepted .env.example, a .pub and an unrelated file stay readable" \
		'unreadable: $BAD' readable repo/.env.example repo/main.rs .ssh/id_old.pub
	run_as "$USR" "$LAUNCHER" --denials --json
	okl "live: a pattern's denial names its line" '$(snip "$OUT")' \
		eval 'grep -q "\"op\":\"open\"" "$OUT" && grep -q "denylist:2\"" "$OUT"'
}

check_moves() {
	as_user 'rm -rf mv && mkdir mv && cd mv && echo S=1 >.env && echo x >plain.txt &&
		ln -s .env env-link' >/dev/null 2>&1
	set_list "${LINES[@]}"
	run_in "$USR" sh -c 'cd && cd mv || exit 9
		mv .env env.txt 2>/dev/null && echo "mv: done" || echo "mv: refused"
		ln .env ../asx-pat-x 2>/dev/null && echo "ln: done" || echo "ln: refused"
		echo x >>.env 2>/dev/null && echo "append: done" || echo "append: refused"
		echo x >.env 2>/dev/null && echo "overwrite: done" || echo "overwrite: refused"
		cp plain.txt copy.txt && mv copy.txt .env.prod 2>/dev/null && echo "mv-onto: done" || echo "mv-onto: refused"
		ln plain.txt .env.ln 2>/dev/null && echo "ln-onto: done" || echo "ln-onto: refused"
		ln -s plain.txt .env.sym 2>/dev/null && echo "symlink: done" || echo "symlink: refused"
		cat env-link >/dev/null 2>&1 && echo "link-read: done" || echo "link-read: refused"
		echo NEW=1 >.env.local && echo "create: done" || echo "create: refused"
		echo k >key.pem && echo "pem: done" || echo "pem: refused"
		cat .env.local >/dev/null 2>&1 && echo "reread: done" || echo "reread: refused"
		echo more >>.env.local 2>/dev/null && echo "reopen: done" || echo "reopen: refused"
		echo E= >.env.example && echo "example: done"'
	okl "moves: a rename or link away from .env, an append or overwrite of it, a rename, link or symlink onto a covered name, a read through a symlink: refused inside" \
		'$(snip "$OUT")' read_as refused mv ln append overwrite mv-onto ln-onto symlink link-read
	okl "moves: nothing was moved or linked, and .env is the user's" '$(ls -A "$UH/mv" | tr "\n" " ")' \
		eval '[ "$(cat "$UH/mv/.env")" = S=1 ] && [ ! -e "$UH/mv/env.txt" ] && [ ! -e "$UH/asx-pat-x" ] && [ ! -e "$UH/mv/.env.prod" ] && [ ! -e "$UH/mv/.env.ln" ] && [ ! -L "$UH/mv/.env.sym" ]'
	okl "moves: a new .env.local and key.pem are written by the open that creates them, and never read or opened again inside" \
		'$(snip "$OUT")' eval 'grep -qx "create: done" "$OUT" && grep -qx "pem: done" "$OUT" && grep -qx "reread: refused" "$OUT" && grep -qx "reopen: refused" "$OUT" && [ "$(cat "$UH/mv/.env.local")" = NEW=1 ]'
	cp "$OUT" "$T/moves.out"
	run_as "$USR" "$LAUNCHER" --denials --json
	okl "moves: an excepted .env.example is written inside" '$(snip "$T/moves.out") $(snip "$ERR") denials: $(tailsnip "$OUT")' \
		has "example: done" "$T/moves.out"
	as_user 'cd mv && mv .env env.txt && mv env.txt .env && echo x >>key.pem && rm key.pem .env.local' >"$OUT" 2>&1
	okl "moves: control: outside, the user renames .env and makes a .pem" '$(snip "$OUT")' test "$?" -eq 0
	rm -f "$UH/asx-pat-x"
}

check_lists() {
	as_user 'rm -rf lst && mkdir -p lst/sec && echo k >lst/a.key && echo s >lst/b.secret &&
		echo s >lst/keep.secret && echo d >lst/sec/data && echo p >lst/sec/x.pub' >/dev/null 2>&1
	cp -p "$BASE_LIST" "$T/base.saved" && BASE_SAVED=1
	printf '%s\n' "**/*.key" >>"$BASE_LIST"
	set_list "!**/a.key" "**/*.secret" "!**/keep.secret" "~/lst/sec/" "!**/*.pub"
	run_in "$USR" sh -c "cd && $READS" sh lst/a.key lst/b.secret lst/keep.secret lst/sec/data \
		lst/sec/x.pub
	okl "lists: a base-list pattern is not excepted by the user's list; the user's own pattern is" \
		'$(snip "$OUT")' eval 'denied lst/a.key lst/b.secret && readable lst/keep.secret'
	okl "lists: a pattern exception re-allows a file below a directory entry of the same list" \
		'$(snip "$OUT")' eval 'denied lst/sec/data && readable lst/sec/x.pub'
	run_in "$USR" sh -c 'cd
		ln lst/sec/data lst/sec/data.pub 2>/dev/null && echo "ln: done" || echo "ln: refused"
		mv lst/sec/data lst/sec/data2.pub 2>/dev/null && echo "mv: done" || echo "mv: refused"
		cat lst/sec/data.pub lst/sec/data2.pub 2>/dev/null && echo "read: done"'
	okl "lists: a denied file is not linked or renamed to a name a pattern exception re-allows" \
		'$(snip "$OUT")' eval 'grep -qx "ln: refused" "$OUT" && grep -qx "mv: refused" "$OUT" && ! has "read: done" "$OUT"'
	cp -p "$T/base.saved" "$BASE_LIST"
	BASE_SAVED=""
	# A new exception, added outside while a sandbox runs: a launch from inside holds it back.
	set_list "**/*.secret"
	run_in "$USR" true
	run_in_after "$USR" 'set_list "**/*.secret" "!**/b.secret"' \
		"$LAUNCHER" sh -c "cd && $READS" sh lst/b.secret
	okl "lists: a new pattern exception does not take effect from a launch inside" '$(snip "$OUT") $(snip "$ERR")' \
		denied lst/b.secret
	run_in "$USR" sh -c "cd && $READS" sh lst/b.secret
	okl "lists: it does from the next launch outside" '$(snip "$OUT") $(snip "$ERR")' readable lst/b.secret
}

# fs_case NAME MOUNTPOINT: a covered name made on the filesystem at MOUNTPOINT after the
# launch is denied inside; an uncovered one there is read
fs_case() {
	local name=$1 m=$2
	install -d -o "$USR" -g "$USR" -m 0755 "$m/d"
	set_list "${LINES[@]}"
	run_in_after "$USR" "runuser -u $USR -- sh -c 'echo s >$m/d/.env; echo s >$m/d/ok.txt'" \
		sh -c "$READS" sh "$m/d/.env" "$m/d/ok.txt"
	okl "filesystems: $name: a .env made after the launch is denied, another file read" \
		'$(snip "$OUT") $(snip "$ERR")' eval 'denied "$m/d/.env" && readable "$m/d/ok.txt"'
}

# loopfs NAME MKFS...: a loop-mounted filesystem at $T/NAME made with MKFS (or a SKIP)
loopfs() {
	local name=$1 dev
	shift
	if ! command -v "$1" >/dev/null; then
		skip "filesystems: $name: $1 not installed (the other guest kernels' runs have it or say so too)"
		return 1
	fi
	if ! { truncate -s 320M "$T/$name.img" && dev=$(losetup -f --show "$T/$name.img"); }; then
		fail "filesystems: $name: a loop device" "losetup"
		return 1
	fi
	LOOPS+=("$dev")
	if ! { "$@" "$dev" >/dev/null 2>&1 && mnt "$T/$name" "$dev"; }; then
		fail "filesystems: $name: mkfs and mount" "$(snip "$T/mount.err")"
		return 1
	fi
}

check_filesystems() {
	mnt "$T/tmpfs" -t tmpfs tmpfs && chmod 0755 "$T/tmpfs" && fs_case tmpfs "$T/tmpfs"
	install -d -m 0755 "$T/lower" "$T/upper" "$T/work"
	mnt "$T/ovl" -t overlay overlay -o "lowerdir=$T/lower,upperdir=$T/upper,workdir=$T/work" &&
		chmod 0755 "$T/ovl" && fs_case overlayfs "$T/ovl"
	loopfs xfs mkfs.xfs -q -f && chmod 0755 "$T/xfs" && fs_case xfs "$T/xfs"
	loopfs btrfs mkfs.btrfs -q -f && chmod 0755 "$T/btrfs" && fs_case btrfs "$T/btrfs"
}

check_deep() {
	as_user 'rm -rf projects other && mkdir -p projects/a/b other/c && echo x >other/c/terraform.tfstate &&
		echo x >projects/a/b/main.tf' >/dev/null 2>&1
	set_list "~/projects/**/terraform.tfstate*"
	run_in_after "$USR" 'as_user "echo s >projects/a/b/terraform.tfstate && mkdir -p projects/new/x/y &&
		echo s >projects/new/x/y/terraform.tfstate.backup && echo s >projects/terraform.tfstate" >/dev/null 2>&1' \
		sh -c "cd && $READS" sh projects/a/b/terraform.tfstate projects/new/x/y/terraform.tfstate.backup \
		projects/terraform.tfstate other/c/terraform.tfstate projects/a/b/main.tf
	okl "deep: DIR/**/NAME denies the name at any depth below DIR, made after the launch" \
		'$(snip "$OUT") $(snip "$ERR")' denied projects/a/b/terraform.tfstate \
		projects/new/x/y/terraform.tfstate.backup projects/terraform.tfstate
	okl "deep: the same name outside DIR, and other names below it, are read" '$(snip "$OUT")' \
		readable other/c/terraform.tfstate projects/a/b/main.tf
	run_in "$USR" sh -c 'cd
		mv projects/a other/a 2>/dev/null && echo "out: done" || echo "out: refused"
		mv other/c projects/c 2>/dev/null && echo "in: done" || echo "in: refused"
		mv projects ../asx-pat-p 2>/dev/null && echo "scope: done" || echo "scope: refused"
		mv projects/a projects/a2 && echo "within: done" || echo "within: refused"'
	okl "deep: a directory is not moved out of or into DIR, nor DIR itself, from inside; within DIR it is" \
		'$(snip "$OUT")' eval 'grep -qx "out: refused" "$OUT" && grep -qx "in: refused" "$OUT" && grep -qx "scope: refused" "$OUT" && grep -qx "within: done" "$OUT"'
	run_in "$USR" sh -c "cd && $READS" sh projects/a2/b/terraform.tfstate
	okl "deep: a file moved within DIR stays denied" '$(snip "$OUT")' denied projects/a2/b/terraform.tfstate
	run_in "$USR" sh -c 'cd && ln -s /tmp projects/infra2 2>/dev/null && echo "symlink: done" || echo "symlink: refused"'
	okl "deep: no symlink is made below DIR from inside (the user's later state would be led out)" \
		'$(snip "$OUT")' eval 'grep -qx "symlink: refused" "$OUT" && [ ! -L "$UH/projects/infra2" ]'
	# A covered name more than 64 levels below DIR: the walk cannot reach DIR, so it fails closed.
	as_user 'd=projects; for i in $(seq 70); do d=$d/l; done; mkdir -p "$d" && echo s >"$d/terraform.tfstate" && echo "$d" >.deep' \
		>/dev/null 2>&1
	run_in "$USR" sh -c "cd && $READS" sh "$(cat "$UH/.deep")/terraform.tfstate"
	okl "deep: a covered name deeper than the walk reaches is denied (fail closed)" '$(tailsnip "$OUT")' \
		denied "$(cat "$UH/.deep")/terraform.tfstate"
}

check_casefold() {
	local m=$T/cf d
	d=$m/ci
	if ! loopfs cf mkfs.ext4 -q -F -O casefold; then
		return
	fi
	install -d -o "$USR" -g "$USR" -m 0755 "$d" "$m/plain"
	if ! chattr +F "$d"; then
		fail "casefold: chattr +F of an empty directory" "chattr"
		return
	fi
	runuser -u "$USR" -- sh -c 'echo k >"$1/x.key"; echo t >"$1/note.txt"; echo u >"$2"' \
		sh "$d" "$(printf '%s/caf\303\251.txt' "$m/plain")"
	set_list "**/*.key"
	# The dentry cache dropped: each lookup below spells the name as it is asked.
	sync
	echo 2 >/proc/sys/vm/drop_caches
	run_in "$USR" sh -c "$READS" sh "$d/x.key" "$d/X.KEY" "$(printf '%s/x.\342\204\252ey' "$d")" \
		"$d/note.txt" "$(printf '%s/caf\303\251.txt' "$m/plain")"
	okl "casefold: a covered name, in another case or a Unicode spelling (KELVIN SIGN for k), is denied in a case-insensitive directory" \
		'$(snip "$OUT")' denied "$d/x.key" "$d/X.KEY" "$(printf '%s/x.\342\204\252ey' "$d")"
	okl "casefold: an uncovered ASCII name there, and a non-ASCII name in a case-sensitive directory, are read" \
		'$(snip "$OUT")' readable "$d/note.txt" "$(printf '%s/caf\303\251.txt' "$m/plain")"
}

# The shipped defaults, and where scripts/guest-suite.sh sets them aside while the mechanism
# suites run (they test lists they write).
readonly DEFAULTS=/etc/agent-sandbox-exec/defaults
readonly DEFAULTS_ASIDE=/var/tmp/agent-sandbox-exec-defaults.aside
DEFAULTS_PUT="" DEFAULTS_MOVED=""

# defaults_on CHECK: put the shipped defaults back for CHECK (the suite set them aside); fails
# CHECK when they are not the package's. defaults_off: set them aside again.
defaults_on() {
	if [ ! -f "$DEFAULTS" ] && [ -f "$DEFAULTS_ASIDE" ]; then
		cp -p "$DEFAULTS_ASIDE" "$DEFAULTS" && DEFAULTS_PUT=1
	fi
	if ! grep -qx "include /usr/share/agent-sandbox-exec/catalog/recommended" "$DEFAULTS" 2>/dev/null; then
		fail "$1: the package's $DEFAULTS includes the recommended catalogue" "$(snip "$DEFAULTS")"
		return 1
	fi
}
defaults_off() {
	if [ -n "$DEFAULTS_PUT" ]; then
		rm -f "$DEFAULTS"
		DEFAULTS_PUT=""
	fi
}

# fresh_user CHECK USER: the shipped defaults on and USER a new test user, its home in
# $FRESH_HOME; false after a FAIL line of CHECK when either cannot be had
FRESH_HOME=""
fresh_user() {
	local c=$1 u=$2
	defaults_on "$c" || return 1
	remove_test_user "$u" || { fail "$c: user $u" "exists and is not a test user"; return 1; }
	useradd -m -s /bin/sh -c "$GECOS" "$u" || { fail "$c: useradd $u" "useradd"; return 1; }
	FRESH_HOME=$(home_of "$u")
}

check_defaults() {
	local u=asx-pat2 h
	fresh_user defaults "$u" || return
	h=$FRESH_HOME
	runuser -u "$u" -- sh -c 'cd && mkdir -p .aws .config/gh .ssh src && echo A >.aws/credentials &&
		echo T >.config/gh/hosts.yml && echo K >.ssh/id_ed25519 && echo P >.ssh/id_ed25519.pub &&
		echo H >.ssh/known_hosts && cd src && git init -q . && echo S=1 >.env && echo S= >.env.example &&
		git add -f .env .env.example && git -c user.email=t@t -c user.name=t commit -qm init' >/dev/null 2>&1
	# A fresh user with no list of their own, in a sandbox started before the clone and the key.
	run_in_after "$u" "runuser -u $u -- sh -c 'cd && git clone -q src clone && echo k >clone/tls.pem' >/dev/null 2>&1" \
		sh -c "cd && $READS" sh .aws/credentials .config/gh/hosts.yml .ssh/id_ed25519 clone/.env \
		clone/tls.pem clone/.env.example .ssh/known_hosts .ssh/id_ed25519.pub
	okl "defaults: a user with no list: ~/.aws/credentials, gh's hosts.yml, an ssh key, a .env cloned and a .pem written after the launch are denied" \
		'$(snip "$OUT") $(snip "$ERR")' denied .aws/credentials .config/gh/hosts.yml .ssh/id_ed25519 \
		clone/.env clone/tls.pem
	okl "defaults: .env.example, known_hosts and the default key's .pub are readable" '$(snip "$OUT")' \
		readable clone/.env.example .ssh/known_hosts .ssh/id_ed25519.pub
	run_in "$u" sh -c 'cd && git clone -q src work && cd work && echo x >a.txt && git add a.txt &&
		git -c user.email=t@t -c user.name=t commit -qm a && echo fine; cat .env 2>&1'
	okl "defaults: git clone (of a repository with a .env) and commit inside work; the .env it wrote is not read" \
		'$(snip "$OUT") $(snip "$ERR")' eval 'has fine "$OUT" && has "Operation not permitted" "$OUT"'

	# The startup groups (startup, autostart, git-config, local-bin): code that runs later,
	# outside, cannot be planted from inside; the XDG base directories the launcher made keep
	# tools' own directories makeable below them.
	run_in "$u" sh -c "cd && $WRITES_INSIDE"
	okl "defaults: ~/.bashrc and ~/.bash_aliases appended, ~/.profile edited by sed -i, a user unit, systemd's user.conf, an autostart entry, a ~/.local/bin shim, a .pth in the Python user site and git config --global are refused inside" \
		'$(snip "$OUT") $(snip "$ERR")' read_as refused bashrc aliases profile unit userconf autostart shim usersite gitconfig
	okl "defaults: tools still make their own directories in ~/.config, ~/.local/share and ~/.local/state inside" \
		'$(snip "$OUT")' read_as ok tooldirs
	run_as "$u" sh -c 'cd && echo "# outside" >>.bashrc && git config --global user.name t && echo fine'
	okl "defaults: the same files are written outside" '$(snip "$OUT") $(snip "$ERR")' has fine "$OUT"

	# The user's own lines: an exception of a default entry, one group off, then all.
	install -d -o "$u" -g "$u" -m 0755 "$h/.config" "$h/.config/agent-sandbox-exec"
	printf '%s\n' "!~/.ssh/id_ed25519" | install -o "$u" -g "$u" -m 0644 /dev/stdin "$h/$HOME_LIST_REL"
	run_in "$u" sh -c "cd && $READS" sh .ssh/id_ed25519 .aws/credentials
	okl "defaults: the user's exception re-allows a file a default directory entry denies; the rest stay" \
		'$(snip "$OUT")' eval 'readable .ssh/id_ed25519 && denied .aws/credentials'
	printf '%s\n' "defaults off cloud" | install -o "$u" -g "$u" -m 0644 /dev/stdin "$h/$HOME_LIST_REL"
	run_in "$u" sh -c "cd && $READS" sh .aws/credentials .config/gh/hosts.yml .ssh/id_ed25519
	okl "defaults: \`defaults off cloud\` turns that group off only" '$(snip "$OUT")' \
		eval 'readable .aws/credentials && denied .config/gh/hosts.yml .ssh/id_ed25519'
	printf '%s\n' "defaults off clouds" | install -o "$u" -g "$u" -m 0644 /dev/stdin "$h/$HOME_LIST_REL"
	run_in "$u" sh -c "cd && $READS" sh .aws/credentials
	okl "defaults: a misspelt group (\`defaults off clouds\`) turns nothing off and the launch says so" \
		'$(snip "$OUT") $(snip "$ERR")' eval 'denied .aws/credentials && has "no group of the shipped defaults has that name" "$ERR"'
	printf '%s\n' "defaults off startup git-config" | install -o "$u" -g "$u" -m 0644 /dev/stdin "$h/$HOME_LIST_REL"
	run_in "$u" sh -c "cd && $WRITES_INSIDE"
	okl "defaults: \`defaults off startup git-config\` lets ~/.bashrc and ~/.gitconfig be written inside; units stay refused" \
		'$(snip "$OUT") $(snip "$ERR")' eval 'read_as ok bashrc gitconfig && read_as refused unit shim'
	printf '%s\n' "defaults off" | install -o "$u" -g "$u" -m 0644 /dev/stdin "$h/$HOME_LIST_REL"
	run_in "$u" sh -c "cd && $READS" sh .config/gh/hosts.yml clone/.env
	okl "defaults: \`defaults off\` turns every default off, and the launch says it protects less" \
		'$(snip "$OUT") $(snip "$ERR")' eval 'readable .config/gh/hosts.yml clone/.env && has "no longer denied" "$ERR"'
	remove_test_user "$u"
	defaults_off
}

# as_u USER CMD: run a shell command line as USER, outside, in its home
as_u() { runuser -u "$1" -- sh -c "cd && $2"; }

# shown_under_defaults FILE: FILE (the output of --check) has the heading of the shipped
# defaults and, after it, the recommended catalogue and lines of its groups: a pattern, the
# repository guard, a file entry, a read-only entry
shown_under_defaults() {
	local after c=/usr/share/agent-sandbox-exec/catalog
	after=$(sed -n '\|^/etc/agent-sandbox-exec/defaults: included by the shipped defaults|,$p' "$1")
	[ -n "$after" ] &&
		grep -q "^$c/recommended: included by /etc/agent-sandbox-exec/defaults:[0-9]" <<<"$after" &&
		grep -q "^$c/repo-secrets:[0-9]*: name pattern, live.*: \*\*/\.env\$" <<<"$after" &&
		grep -q "^$c/git-repositories:[0-9]*: .*repository guard, live.*: readonly \*\*/\.git/\$" <<<"$after" &&
		grep -q "^$c/package-registries:[0-9]*: .*: ~/\.npmrc\$" <<<"$after" &&
		grep -q "^$c/startup:[0-9]*: read-only.*: ~/\.bashrc\$" <<<"$after"
}

# errs_of NAME...: check_claims' stderr of each git command NAME run inside, on one line
errs_of() {
	local n
	for n in "$@"; do
		printf '%s: %s ' "$n" "$(snip "$CLAIMS_HOME/err.$n")"
	done
}
# errs_say STRING NAME...: the stderr of each NAME says STRING (in either case)
errs_say() {
	local s=$1 n
	shift
	for n in "$@"; do
		grep -qiF -- "$s" "$CLAIMS_HOME/err.$n" 2>/dev/null || return 1
	done
}

# The rest of README's "What a fresh install protects" (check_defaults makes the first of its
# claims): a fresh user with the shipped defaults and no list, then with the lines of its own.
check_claims() {
	local u=asx-pat4 h
	fresh_user claims "$u" || return
	h=$FRESH_HOME
	CLAIMS_HOME=$h
	# Outside: a bare repository remote.git (the remote: no `.git` in its path) whose main
	# commits a submodule (sub.git), cloned to proj, then one commit more pushed to it (for
	# fetch and pull inside); empty directories mine and mine2; app/ with templates, CA
	# bundles and their controls; a ~/.npmrc; the startup files WRITES_MORE appends to.
	as_u "$u" 'git config --global user.name t && git config --global user.email t@t &&
		git config --global init.defaultBranch main && git config --global protocol.file.allow always &&
		git config --global advice.detachedHead false &&
		git init -q --bare sub.git && git init -q subw && cd subw && echo s >s.txt && git add s.txt &&
		git commit -qm s && git push -q ../sub.git main && cd &&
		git init -q --bare remote.git && git init -q seed && cd seed && echo a >a.txt && git add a.txt &&
		git commit -qm a && git submodule add -q "$HOME/sub.git" sub && git commit -qm sub &&
		git push -q ../remote.git main && cd && git clone -q remote.git proj && cd seed &&
		echo c >c.txt && git add c.txt && git commit -qm outside-c && git push -q ../remote.git main &&
		cd && mkdir mine mine2 app && cd app && for f in .env .env.local .env.production .env.sample \
			.env.template cacert.pem ca-bundle.pem server.pem; do echo "$f" >"$f" || exit 1; done &&
		cd && echo "//registry.example.invalid/:_authToken=t" >.npmrc && echo z >.zshrc &&
		echo z >.tmux.conf && mkdir -p -m 0700 .ssh && echo z >.ssh/authorized_keys &&
		echo "h ssh-ed25519 AAAA" >.ssh/known_hosts && mkdir -p .config/fish .config/git &&
		echo z >.config/fish/config.fish' >"$T/claims.log" 2>&1
	okl "claims: setup outside: repositories, a submodule, app/ files, startup files" \
		'$(tailsnip "$T/claims.log")' test "$?" -eq 0
	cp "$h/proj/.git/config" "$T/claims.config"
	(cd "$h" && cat .zshrc .tmux.conf .ssh/authorized_keys .ssh/known_hosts .config/fish/config.fish) |
		cksum >"$T/claims.sum"

	# repo-secrets' template and CA-bundle exceptions; known_hosts readable.
	run_in "$u" sh -c "cd && $READS" sh app/.env.sample app/.env.template app/cacert.pem \
		app/ca-bundle.pem app/.env.local app/server.pem .ssh/known_hosts
	okl "claims: .env.sample, .env.template, cacert.pem, ca-bundle.pem and known_hosts are readable inside" \
		'$(snip "$OUT") $(snip "$ERR")' readable app/.env.sample app/.env.template app/cacert.pem \
		app/ca-bundle.pem .ssh/known_hosts
	okl "claims: control: .env.local and server.pem next to them are denied" '$(snip "$OUT")' \
		denied app/.env.local app/server.pem

	# The repository guard, in the user's repository proj (cloned outside).
	run_in "$u" sh -c 'cd && cd proj || exit 9
		t() { n=$1; shift; if "$@" >/dev/null 2>"$HOME/err.$n"; then echo "$n: ok"; else echo "$n: failed"; fi; }
		t fetch git fetch -q origin
		t pull git pull -q --ff-only
		echo b >b.txt
		t add git add b.txt
		t commit git commit -qm inside-b
		t checkout git checkout -q -b feat
		echo f >f.txt && git add f.txt && git commit -qm inside-f && git checkout -q main &&
			echo m >m.txt && git add m.txt && git commit -qm inside-m && git checkout -q feat
		t rebase git rebase -q main
		echo s >>a.txt
		t stash sh -c "git stash -q && git stash pop -q"
		t push git push -q origin main
		t config git config asx.inside yes
		t remote-add git remote add up ../remote.git
		t push-u git push -q -u origin feat
		t branch-u git branch -u origin/main feat
		t track git checkout -q -b t --track origin/main
		t submodule git submodule -q update --init
		cd ../mine && t init git init -q
		cd ../mine2 && t clone-dot git clone -q ../remote.git .
		cd && mkdir agent && t agent-init git init -q agent && t agent-config git -C agent config asx.agent yes'
	cp "$OUT" "$T/claims.git"
	okl "claims: inside, in the user's repository, add, commit, checkout, rebase, stash, fetch, pull and push work (push to a bare repository)" \
		'$(snip "$T/claims.git") $(errs_of fetch pull add commit checkout rebase stash push)' \
		read_as ok fetch pull add commit checkout rebase stash push
	as_u "$u" 'git --git-dir=remote.git log --format=%s main' >"$T/claims.log" 2>&1
	okl "claims: the remote holds the commits made inside, after the one pulled" '$(snip "$T/claims.log")' \
		eval '[ "$(head -n 3 "$T/claims.log" | tr "\n" " ")" = "inside-m inside-b outside-c " ]'
	okl "claims: inside, git config, git remote add and git submodule update --init fail there" \
		'$(snip "$T/claims.git") $(errs_of config remote-add submodule)' read_as failed config remote-add submodule
	# git goes on (exit 0) when it cannot record an upstream: the branch is pushed or made, untracked.
	okl "claims: inside, git push -u, git branch -u and a new branch tracking origin/main say they cannot write .git/config (and record no upstream: below)" \
		'$(errs_of push-u branch-u track)' errs_say "could not write config file .git/config" push-u branch-u track
	okl "claims: .git/config is unchanged (no upstream, remote, key or submodule recorded), no submodule was cloned" \
		'$(diff "$T/claims.config" "$h/proj/.git/config" | tr "\n" "|") $(ls -A "$h/proj/.git" "$h/proj/sub" 2>&1 | tr "\n" " ")' \
		eval 'cmp -s "$T/claims.config" "$h/proj/.git/config" && [ ! -e "$h/proj/.git/modules" ] && [ ! -e "$h/proj/sub/s.txt" ]'
	okl "claims: git init and git clone URL . in a directory made outside fail inside; no .git is made" \
		'$(errs_of init clone-dot) $(ls -A "$h/mine" "$h/mine2" | tr "\n" " ")' \
		eval 'read_as failed init clone-dot && [ ! -e "$h/mine/.git" ] && [ ! -e "$h/mine2/.git" ]'
	okl "claims: a repository made inside, in a directory made inside, keeps its configuration writable there" \
		'$(snip "$T/claims.git")' read_as ok agent-init agent-config
	as_u "$u" 'cd proj && git config asx.outside yes && git config --local asx.outside && cd ../mine && git init -q &&
		test -d .git' >"$T/claims.log" 2>&1
	okl "claims: control: outside, git config in the repository and git init in the directory work" \
		'$(snip "$T/claims.log")' eval '[ "$(cat "$T/claims.log")" = yes ]'

	# The other startup files, git's XDG configuration, ~/bin and known_hosts.
	run_in "$u" sh -c "cd && $WRITES_MORE"
	okl "claims: inside, ~/.zshrc, fish's config.fish, ~/.vimrc (missing), ~/.tmux.conf (by a rename), ~/.ssh/authorized_keys, ~/.config/environment.d/x.conf, ~/.config/git/config, ~/bin/x and ~/.ssh/known_hosts are refused" \
		'$(snip "$OUT") $(snip "$ERR")' read_as refused zshrc fish vimrc tmux authkeys envd gitxdg bin knownhosts
	okl "claims: nothing of them was changed or made" '$(ls -A "$h" "$h/.config" | tr "\n" " ")' \
		eval '(cd "$h" && cat .zshrc .tmux.conf .ssh/authorized_keys .ssh/known_hosts .config/fish/config.fish) | cksum | cmp -s - "$T/claims.sum" && [ ! -e "$h/.vimrc" ] && [ ! -e "$h/bin" ] && [ ! -e "$h/.config/environment.d" ] && [ ! -e "$h/.config/git/config" ]'
	run_as "$u" sh -c "cd && $WRITES_MORE"
	okl "claims: the same are written outside" '$(snip "$OUT") $(snip "$ERR")' \
		read_as ok zshrc fish vimrc tmux authkeys envd gitxdg bin knownhosts

	# --check, as the user: the defaults' lines under their heading; a misspelt group named.
	run_as "$u" "$LAUNCHER" --check
	cp "$OUT" "$T/claims.check"
	okl "claims: --check lists the defaults' lines under \"the shipped defaults\"" \
		'$(grep -m3 "shipped defaults\|catalog/repo-secrets" "$T/claims.check" | tr "\n" "|" | head -c 400)' \
		shown_under_defaults "$T/claims.check"

	# The user's own lines with the defaults.
	install -d -o "$u" -g "$u" -m 0755 "$h/.config" "$h/.config/agent-sandbox-exec"
	printf '%s\n' "defaults off clouds" | install -o "$u" -g "$u" -m 0644 /dev/stdin "$h/$HOME_LIST_REL"
	run_as "$u" "$LAUNCHER" --check
	okl "claims: --check names a \`defaults off\` group that is none" '$(snip "$OUT")' \
		has "defaults off clouds: no group of the shipped defaults has that name" "$OUT"
	printf '%s\n' "!~/app/.env" "!**/.env.local" "!~/.npmrc" |
		install -o "$u" -g "$u" -m 0644 /dev/stdin "$h/$HOME_LIST_REL"
	run_in "$u" sh -c "cd && $READS" sh app/.env app/.env.local app/.env.production .npmrc
	cp "$ERR" "$T/claims.err"
	okl "claims: a plain-path exception (!~/app/.env) does not except the match of **/.env; a pattern exception (!**/.env.local) re-allows .env.local, not .env.production" \
		'$(snip "$OUT") $(snip "$T/claims.err")' eval 'denied app/.env app/.env.production && readable app/.env.local'
	okl "claims: a file line (~/.npmrc) cannot be excepted (!~/.npmrc)" '$(snip "$OUT")' denied .npmrc
	printf '%s\n' "defaults off local-bin" | install -o "$u" -g "$u" -m 0644 /dev/stdin "$h/$HOME_LIST_REL"
	run_in "$u" sh -c "cd && $WRITES_INSIDE"
	okl "claims: \`defaults off local-bin\` lets ~/.local/bin/x and the user site be written inside; ~/.bashrc and user units stay refused" \
		'$(snip "$OUT") $(snip "$ERR")' eval 'read_as ok shim usersite && read_as refused bashrc unit gitconfig'
	printf '%s\n' "defaults off git-repositories" | install -o "$u" -g "$u" -m 0644 /dev/stdin "$h/$HOME_LIST_REL"
	run_in "$u" sh -c 'cd && cd proj && git config asx.off yes && git remote add up ../remote.git && echo fine
		mkdir -p ../.local/bin && echo >../.local/bin/y && echo "local-bin: written"'
	okl "claims: \`defaults off git-repositories\` lets git config and git remote add work in the user's repository inside; ~/.local/bin stays refused" \
		'$(snip "$OUT") $(snip "$ERR")' eval 'has fine "$OUT" && [ "$(as_u "$u" "git -C proj config --local asx.off")" = yes ] && ! has "local-bin: written" "$OUT"'
	remove_test_user "$u"
	defaults_off
}

# Tools a user runs inside with the shipped defaults on: ssh to a host through the user's
# ssh-agent started outside (the keys in ~/.ssh are denied), and pip in a virtual environment
# with a ~/.config/pip/pip.conf (holding an index token) that the defaults deny.
# TINY_WHEEL_PY: a python3 program that writes a wheel of one empty module, asxprobe 1.0,
# to argv[1] (a zip with the module and the dist-info files of the wheel format, PEP 427).
TINY_WHEEL_PY='
import base64, hashlib, sys, zipfile
files = {
    "asxprobe/__init__.py": "",
    "asxprobe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: asxprobe\nVersion: 1.0\n",
    "asxprobe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: asx-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def digest(text):
    d = hashlib.sha256(text.encode()).digest()
    return "sha256=" + base64.urlsafe_b64encode(d).rstrip(b"=").decode()
record = "".join("%s,%s,%d\n" % (n, digest(t), len(t)) for n, t in files.items())
files["asxprobe-1.0.dist-info/RECORD"] = record + "asxprobe-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
'

check_tools() {
	local u=asx-pat3 h a=/tmp/asx-pat3-agent.sock agent ssh_in
	if [ ! -x /usr/sbin/sshd ] || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
		fail "tools: openssh-server and python3-venv are in the guest image" "sshd or venv missing"
		return
	fi
	fresh_user tools "$u" || return
	h=$FRESH_HOME
	systemctl start ssh.service >/dev/null 2>&1
	wait_for 60 sh -c 'ss -ltn | grep -q ":22 "' ||
		fail "tools: sshd listens on port 22" "$(systemctl status ssh.service 2>&1 | tail -n 3 | tr '\n' '|')"
	# Outside: a key authorized for the user on this host, the host known, an ssh-agent holding the key.
	runuser -u "$u" -- sh -c 'cd && mkdir -p -m 0700 .ssh && ssh-keygen -q -t ed25519 -N "" -f .ssh/id_ed25519 &&
		cp .ssh/id_ed25519.pub .ssh/authorized_keys && ssh-keyscan -t ed25519 localhost >.ssh/known_hosts' \
		>/dev/null 2>&1
	rm -f "$a"
	timeout -k 5 600 runuser -u "$u" -- ssh-agent -D -a "$a" </dev/null >/dev/null 2>&1 &
	agent=$!
	wait_for 30 test -S "$a" || fail "tools: the user's ssh-agent starts outside" "no socket $a"
	run_as "$u" env SSH_AUTH_SOCK="$a" ssh-add "$h/.ssh/id_ed25519"
	run_as "$u" env SSH_AUTH_SOCK="$a" ssh -T -o BatchMode=yes localhost echo ssh-works
	okl "tools: outside, ssh -T localhost logs in with the key through the agent" '$(snip "$OUT") $(snip "$ERR")' \
		has ssh-works "$OUT"
	ssh_in='cd && ssh -T -o BatchMode=yes localhost echo ssh-works; cat .ssh/id_ed25519 2>&1 | head -n 1'
	run_as "$u" env SSH_AUTH_SOCK="$a" "$LAUNCHER" sh -c "$ssh_in"
	okl "tools: inside, without \`socket \$SSH_AUTH_SOCK\` in the list, ssh -T cannot log in (the key file and the agent outside are refused)" \
		'$(snip "$OUT") $(snip "$ERR")' eval '! has ssh-works "$OUT" && has "Operation not permitted" "$OUT"'
	install -d -o "$u" -g "$u" -m 0755 "$h/.config" "$h/.config/agent-sandbox-exec"
	printf '%s\n' 'socket $SSH_AUTH_SOCK' | install -o "$u" -g "$u" -m 0644 /dev/stdin "$h/$HOME_LIST_REL"
	run_as "$u" env SSH_AUTH_SOCK="$a" "$LAUNCHER" sh -c "$ssh_in"
	okl "tools: inside, with \`socket \$SSH_AUTH_SOCK\` in the list, ssh -T localhost logs in through the user's ssh-agent; the key file stays denied" \
		'$(snip "$OUT") $(snip "$ERR")' eval 'has ssh-works "$OUT" && has "Operation not permitted" "$OUT"'
	# A host not known yet (an alias of this one), with StrictHostKeyChecking=accept-new: ssh
	# inside logs in but cannot add it to known_hosts, and says so; ssh outside adds it.
	cp "$h/.ssh/known_hosts" "$T/tools.kh"
	run_as "$u" env SSH_AUTH_SOCK="$a" "$LAUNCHER" ssh -T -o BatchMode=yes -o StrictHostKeyChecking=accept-new \
		-o HostKeyAlias=asx-newhost localhost echo ssh-works
	okl "tools: inside, ssh -o StrictHostKeyChecking=accept-new to a new host logs in, adds nothing to known_hosts and says so" \
		'$(snip "$OUT") $(snip "$ERR") $(diff "$T/tools.kh" "$h/.ssh/known_hosts" | tr "\n" "|")' \
		eval 'has ssh-works "$OUT" && has "Failed to add the host" "$ERR" && cmp -s "$T/tools.kh" "$h/.ssh/known_hosts"'
	run_as "$u" env SSH_AUTH_SOCK="$a" ssh -T -o BatchMode=yes -o StrictHostKeyChecking=accept-new \
		-o HostKeyAlias=asx-newhost localhost echo ssh-works
	okl "tools: control: outside, the same ssh adds the host to known_hosts" '$(snip "$OUT") $(snip "$ERR")' \
		eval 'has ssh-works "$OUT" && runuser -u "$u" -- ssh-keygen -F asx-newhost -f "$h/.ssh/known_hosts" >/dev/null'
	kill "$agent" 2>/dev/null
	# pip: a pip.conf with an index token (denied by the defaults); a virtual environment and
	# an install of a one-module wheel made outside (the guest has no network) by pip run from
	# Debian's bundled wheel (python3-pip-whl, what the venv's ensurepip would install: one pip
	# run instead of two, each a minute under TCG beside other guests). Up to 300 s.
	runuser -u "$u" -- sh -c 'cd && mkdir -p .config/pip &&
		printf "[global]\nindex-url = https://u:secret-token@pypi.example.invalid/simple\n" >.config/pip/pip.conf'
	runuser -u "$u" -- python3 -c "$TINY_WHEEL_PY" "$h/asxprobe-1.0-py3-none-any.whl"
	CMD_TIMEOUT=300 run_in "$u" sh -c 'cd && cat .config/pip/pip.conf 2>&1; python3 -m venv --without-pip venv &&
		pip=$(ls /usr/share/python-wheels/pip-*.whl | head -n 1)/pip &&
		venv/bin/python "$pip" install -q --no-index asxprobe-1.0-py3-none-any.whl &&
		venv/bin/python -c "import asxprobe" && venv/bin/python "$pip" config list && echo pip-works'
	okl "tools: inside, python3 -m venv and pip install (Debian's bundled pip) work; the pip.conf the defaults deny is read neither by cat nor by pip" \
		'$(snip "$OUT") $(snip "$ERR")' eval 'has pip-works "$OUT" && has "Operation not permitted" "$OUT" && ! has secret-token "$OUT"'
	remove_test_user "$u"
	rm -f "$a"
	defaults_off
}

check_check() {
	as_user 'mkdir -p repo && echo A=1 >repo/.env' >/dev/null 2>&1
	set_list "${LINES[@]}" "**/a*b*" "~/x/**/y/**/z*" "**/[ab]"
	run_as "$USR" "$LAUNCHER" --check
	okl "check: a pattern line is shown live, with what it matches now" '$(snip "$OUT")' \
		eval 'grep -q "denylist:2: name pattern, live .*file(s) match now in $UH and below" "$OUT"'
	okl "check: no pattern is called a glob mistake" '$(snip "$OUT")' eval '! grep -q "not expanded" "$OUT"'
	okl "check: two stars, DIR/**/NAME and a class are warned about, by line" '$(snip "$OUT") $(snip "$ERR")' \
		eval 'grep -q "denylist:8: a name pattern may hold one" "$OUT" && grep -q "denylist:9: .\*\*. stands only as the last directory" "$OUT" && grep -q "denylist:10: .\[. character classes" "$OUT"'
}

check_workflow() {
	as_user 'rm -rf wf' >/dev/null 2>&1
	set_list "${LINES[@]}"
	# The project's directory made inside (the repository guard of the defaults lets a
	# sandbox make a `.git` only in a directory made inside).
	run_in "$USR" sh -c 'cd && mkdir wf && cd wf && git init -q . && echo A= >.env.example && echo x >a.txt &&
		git add . && git -c user.email=t@t -c user.name=t commit -qm one &&
		git checkout -q -b feature && echo y >>a.txt && git stash -q && git stash pop -q &&
		git -c user.email=t@t -c user.name=t commit -qam two && git checkout -q - && echo fine'
	okl "workflow: git init, add, commit, checkout -b, stash inside with the patterns on" \
		'$(snip "$OUT") $(snip "$ERR")' eval '[ "$RC" -eq 0 ] && has fine "$OUT"'
}

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "running as root" "uid $(id -u)"
		return 1
	fi
	require_commands "$LAUNCHER" git || return 1
}

setup() {
	T=$(mktemp -d /tmp/asx-pat.XXXXXX) || return 1
	chmod 0755 "$T"
	OUT=$T/out ERR=$T/err
	remove_test_user "$USR" || { echo "user $USR exists and is not a test user" >&2; return 1; }
	useradd -m -s /bin/sh -c "$GECOS" "$USR" || return 1
	UH=$(home_of "$USR")
	# The checks but `defaults` test the lists they write: the shipped defaults (which cover
	# `terraform.tfstate*` everywhere, ...) are set aside as scripts/guest-suite.sh does.
	if [ -f "$DEFAULTS" ]; then
		mv "$DEFAULTS" "$DEFAULTS_ASIDE" && DEFAULTS_MOVED=1
	fi
	wait_for 300 test -s /run/agent-sandbox-exec/ready || { echo "the daemon is not serving" >&2; return 1; }
}

cleanup() {
	local m d
	[ "$CLEANED" -eq 1 ] && return 0
	CLEANED=1
	[ -n "$BASE_SAVED" ] && cp -p "$T/base.saved" "$BASE_LIST"
	[ -n "$DEFAULTS_PUT" ] && rm -f "$DEFAULTS"
	[ -n "$DEFAULTS_MOVED" ] && mv "$DEFAULTS_ASIDE" "$DEFAULTS"
	remove_test_user asx-pat2
	remove_test_user asx-pat3
	remove_test_user asx-pat4
	rm -f /tmp/asx-pat3-agent.sock
	remove_test_user "$USR"
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		m=${MOUNTS[i]}
		umount -l "$m" 2>/dev/null
	done
	for d in "${LOOPS[@]}"; do
		losetup -d "$d" 2>/dev/null
	done
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test user, daemon)"
