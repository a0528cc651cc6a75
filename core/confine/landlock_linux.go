package confine

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// landlockConfigs are go-landlock's configurations by ABI version (index
// 0 is ABI 1): each handles every file right, network right and scope of
// its version, so anything no rule grants is denied.
var landlockConfigs = []landlock.Config{
	landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
	landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
}

// fileRights are the Landlock rights that apply to a file (the others
// apply to directories only, and the kernel refuses them on a file).
const fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
	ll.AccessFSTruncate | ll.AccessFSIoctlDev

// rights are the Landlock rights of a, for a directory; handled is what
// the configuration handles. AccessAll is every handled right but
// connect(2) to the Unix sockets beneath (ABI 9's resolve_unix): the
// handler has no socket to connect with, and a socket there may be
// another process's.
func rights(a Access, handled landlock.AccessFSSet) landlock.AccessFSSet {
	var r landlock.AccessFSSet
	switch a {
	case AccessRead:
		r = ll.AccessFSReadFile | ll.AccessFSReadDir
	case AccessReadExec:
		r = ll.AccessFSReadFile | ll.AccessFSReadDir | ll.AccessFSExecute
	case AccessReadWrite:
		r = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	case AccessAll:
		r = handled &^ ll.AccessFSResolveUnix
	}
	return r & handled
}

// restrictLandlock restricts the calling thread to rules with Landlock at
// ABI abi (go-landlock's configuration of that version, not best effort:
// what the version handles is enforced or the call fails), after setting
// no_new_privs on it. The calling thread only: it is the launcher's
// locked thread, which execs the handler next, and exec leaves the new
// program that one thread, with its Landlock domain. Restricting every
// thread (go-landlock's Restrict) stops the world twice and cost the
// launcher most of a millisecond here.
func restrictLandlock(abi int, rules []Rule) error {
	if abi < 1 || abi > len(landlockConfigs) {
		return fmt.Errorf("landlock ABI %d: %w", abi, ErrUnsupported)
	}
	cfg := landlockConfigs[abi-1]
	attr := ll.RulesetAttr{HandledAccessFS: uint64(cfg.HandledAccessFS), HandledAccessNet: uint64(cfg.HandledAccessNet), Scoped: uint64(cfg.Scoped)}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("landlock ABI %d: create the ruleset: %w", abi, err)
	}
	defer unix.Close(fd)
	for _, r := range rules {
		if err := addRule(fd, r, cfg.HandledAccessFS); err != nil {
			return fmt.Errorf("landlock ABI %d: rule %s: %w", abi, r.Path, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, logFlags(abi)); err != nil {
		return fmt.Errorf("landlock ABI %d: restrict: %w", abi, err)
	}
	return nil
}

// addRule adds r to the ruleset fd with the rights of its access that the
// ruleset handles (only a file's rights for a file).
func addRule(fd int, r Rule, handled landlock.AccessFSSet) error {
	pfd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return err
	}
	set := rights(r.Access, handled)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		set &= fileRights
	}
	if set == 0 {
		return nil
	}
	return ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: uint64(set), ParentFd: pfd}, 0)
}

// landlockLogs is the first ABI with the logging flags.
const landlockLogs = 7

// logFlags has the kernel log (to its audit log, where audit is on) what
// Landlock denies the handler, which runs after the launcher's exec, and
// not what it denies the launcher itself; before ABI 7 there are no such
// flags, and nothing is logged after an exec.
func logFlags(abi int) uint32 {
	if abi < landlockLogs {
		return 0
	}
	return ll.FlagRestrictSelfLogSameExecOff | ll.FlagRestrictSelfLogNewExecOn
}
