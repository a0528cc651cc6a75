package confine

import (
	"fmt"
	"strings"
)

// Support says what this system gives to confine a handler. Probe fills
// it for the running system; tests build their own.
type Support struct {
	// OS is the system (runtime.GOOS) the support is for.
	OS string
	// Landlock is the Landlock ABI version the kernel offers, as
	// go-landlock uses it (0: none; a kernel whose signal scoping is
	// broken counts as 5). Linux only.
	Landlock int
	// Seccomp is whether seccomp filters can be loaded. Linux only.
	Seccomp bool
	// Seatbelt is whether /usr/bin/sandbox-exec is there. macOS only.
	Seatbelt bool
}

// The Landlock ABI versions that change what a confined handler can do.
const (
	landlockScoped      = 6 // signals and abstract Unix sockets scoped to the domain
	landlockTCP         = 4 // TCP bind and connect by port
	landlockResolveUnix = 9 // connect(2)/sendmsg(2) on pathname Unix sockets
	landlockUDP         = 10
)

// String describes the support on one line, for `carapace doctor` and
// `carapace plugin list`.
func (s Support) String() string {
	switch s.OS {
	case "linux":
		var parts []string
		if s.Landlock < 1 {
			parts = append(parts, "no landlock")
		} else {
			what := []string{"files"}
			if s.Landlock >= landlockTCP {
				what = append(what, "TCP ports")
			}
			if s.Landlock >= landlockUDP {
				what = append(what, "UDP ports")
			}
			if s.Landlock >= landlockResolveUnix {
				what = append(what, "pathname Unix sockets")
			}
			if s.Landlock >= landlockScoped {
				what = append(what, "signals and abstract sockets scoped")
			} else {
				what = append(what, "signals by seccomp instead")
			}
			parts = append(parts, fmt.Sprintf("landlock ABI %d (%s)", s.Landlock, strings.Join(what, ", ")))
		}
		if s.Seccomp {
			parts = append(parts, "seccomp (no sockets)")
		} else {
			parts = append(parts, "no seccomp")
		}
		return strings.Join(parts, ", ")
	case "darwin":
		if s.Seatbelt {
			return "seatbelt (sandbox-exec)"
		}
		return "no seatbelt (/usr/bin/sandbox-exec is missing)"
	}
	return fmt.Sprintf("no confinement on %s", s.OS)
}

// Missing returns nil when a Policy can be enforced, else an error that
// names the missing feature and wraps ErrUnsupported.
func (s Support) Missing() error {
	switch s.OS {
	case "linux":
		if s.Landlock < 1 {
			return fmt.Errorf("%w: this kernel has no Landlock: needs Linux ≥ 5.13 with landlock in the lsm= list", ErrUnsupported)
		}
		if !s.Seccomp {
			return fmt.Errorf("%w: this kernel has no seccomp filters: needs Linux ≥ 3.17 built with CONFIG_SECCOMP_FILTER", ErrUnsupported)
		}
		return nil
	case "darwin":
		if !s.Seatbelt {
			return fmt.Errorf("%w: /usr/bin/sandbox-exec is missing: macOS's Seatbelt confines plugins", ErrUnsupported)
		}
		return nil
	}
	return fmt.Errorf("%w: no confinement for plugins on %s", ErrUnsupported, s.OS)
}
