package confine

import (
	"os/exec"
	"path/filepath"
	"slices"
)

// sandboxExec runs a program under a Seatbelt profile.
const sandboxExec = "/usr/bin/sandbox-exec"

// Wrap rewrites cmd, built by the caller for the handler (Path, Args,
// Env, Dir, ExtraFiles, SysProcAttr set), so that it starts under
// sandbox-exec with SeatbeltProfile(p): sandbox-exec applies the profile
// to itself and execs the handler, which keeps the pid, the environment
// and the inherited descriptors; its argv[0] becomes p.Exec. Paths that
// resolve elsewhere (symbolic links) are allowed in both forms, since
// Seatbelt matches resolved paths. cmd.Path must be p.Exec.
func Wrap(cmd *exec.Cmd, p Policy) error {
	args, err := prepare(cmd, p)
	if err != nil {
		return err
	}
	p.Read = withResolved(p.Read)
	p.Write = withResolved(p.Write)
	cmd.Path = sandboxExec
	cmd.Args = append([]string{"sandbox-exec", "-p", SeatbeltProfile(p), p.Exec}, args[1:]...)
	return nil
}

// withResolved returns paths and, after them, each one's resolved form
// where it differs.
func withResolved(paths []string) []string {
	out := slices.Clone(paths)
	for _, p := range paths {
		if r, err := filepath.EvalSymlinks(p); err == nil && r != p && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}
