package confine

import (
	"fmt"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
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

// restrictLandlock restricts every thread of the process to rules with
// Landlock at ABI abi (go-landlock's configuration of that version, not
// best effort: what the version handles is enforced or the call fails).
// It also sets no_new_privs on every thread.
func restrictLandlock(abi int, rules []Rule) error {
	if abi < 1 || abi > len(landlockConfigs) {
		return fmt.Errorf("landlock ABI %d: %w", abi, ErrUnsupported)
	}
	cfg := landlockConfigs[abi-1]
	out := make([]landlock.Rule, 0, len(rules))
	for _, r := range rules {
		fi, err := os.Stat(r.Path)
		if err != nil {
			return fmt.Errorf("landlock rule %s: %w", r.Path, err)
		}
		set := rights(r.Access, cfg.HandledAccessFS)
		if !fi.IsDir() {
			set &= fileRights
		}
		if set == 0 {
			continue
		}
		out = append(out, landlock.PathAccess(set, r.Path))
	}
	if err := cfg.Restrict(out...); err != nil {
		return fmt.Errorf("landlock ABI %d: %w", abi, err)
	}
	return nil
}
