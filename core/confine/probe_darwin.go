package confine

import (
	"os"
	"sync"
)

// probe is Probe, once per process.
var probe = sync.OnceValue(func() Support {
	fi, err := os.Stat(sandboxExec)
	return Support{OS: "darwin", Seatbelt: err == nil && fi.Mode()&0o111 != 0}
})

// Probe says what this system gives: whether sandbox-exec is there. It
// looks once per process.
func Probe() Support { return probe() }
