package confine

import (
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// probe is Probe, once per process.
var probe = sync.OnceValue(func() Support {
	return Support{OS: "linux", Landlock: landlockABI(), Seccomp: seccomp.Supported()}
})

// Probe says what this kernel gives. It asks the kernel once per process
// and is cheap after that.
func Probe() Support { return probe() }

// landlockABI is the Landlock ABI version as go-landlock will use it: 0
// without Landlock, 5 for a kernel of ABI 6 or later whose signal scoping
// is broken (erratum 2 not fixed), at most the newest version go-landlock
// knows.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 1 {
		return 0
	}
	if v >= landlockScoped {
		errata, err := ll.LandlockGetErrata()
		if err != nil || errata&0x2 == 0 {
			v = landlockScoped - 1
		}
	}
	return min(v, len(landlockConfigs))
}
