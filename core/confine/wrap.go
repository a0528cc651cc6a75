package confine

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
)

// prepare checks what Wrap needs on every system: a command not yet
// started, a valid policy for the very executable cmd runs, and a system
// that can enforce it. It returns cmd's arguments (argv[0] included).
func prepare(cmd *exec.Cmd, p Policy) ([]string, error) {
	if cmd.Process != nil {
		return nil, errors.New("confine: the command has started already")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if filepath.Clean(cmd.Path) != p.Exec {
		return nil, fmt.Errorf("%w: plugin %s: the command runs %q, the policy is for %q", ErrPolicy, quote(p.Plugin), cmd.Path, p.Exec)
	}
	if err := Probe().Missing(); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", quote(p.Plugin), err)
	}
	args := cmd.Args
	if len(args) == 0 {
		args = []string{cmd.Path}
	}
	return args, nil
}
