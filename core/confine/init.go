package confine

import "os"

// init turns a binary that links this package into the launcher when Wrap
// re-executed it for want of bin/carapace-confine beside it: go test
// binaries and a bare `go build` of the core confine their handlers with
// no extra file.
func init() {
	if os.Getenv(envSelf) == "1" {
		Launch()
	}
}
