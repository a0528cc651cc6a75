//go:build !linux && !darwin

package confine

import "os/exec"

// Wrap fails on this system: there is no confinement for plugins here.
func Wrap(cmd *exec.Cmd, p Policy) error {
	_, err := prepare(cmd, p)
	return err
}
