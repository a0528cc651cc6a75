//go:build !linux && !darwin

package confine

import "runtime"

// Probe says what this system gives: nothing.
func Probe() Support { return Support{OS: runtime.GOOS} }
