package confine

import (
	"os"
	"os/exec"
	"path/filepath"
)

// launcherName is the launcher's file name: `make build` puts it beside
// bin/carapace.
const launcherName = "carapace-confine"

// findLauncher returns the launcher to start and whether it is this
// binary re-executed (self mode). A test replaces it.
var findLauncher = defaultLauncher

// defaultLauncher is carapace-confine beside this binary when it is
// there, else this binary itself: /proc/self/exe, which is this binary
// even when its file has been replaced since it started.
func defaultLauncher() (string, bool) {
	if exe, err := os.Executable(); err == nil {
		l := filepath.Join(filepath.Dir(exe), launcherName)
		if fi, err := os.Stat(l); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return l, false
		}
	}
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", true
	}
	exe, _ := os.Executable()
	return exe, true
}

// Wrap rewrites cmd, built by the caller for the handler (Path, Args,
// Env, Dir, ExtraFiles, SysProcAttr set), so that it starts through the
// launcher, which confines itself by p and execs the handler with the
// same arguments, environment and inherited descriptors (Launch). exec
// keeps the pid, so Setpgid and Pdeathsig hold for the handler. cmd.Path
// must be p.Exec. Wrap fails, and leaves cmd as it was, when p is invalid
// or the kernel cannot enforce it (Support.Missing).
func Wrap(cmd *exec.Cmd, p Policy) error {
	args, err := prepare(cmd, p)
	if err != nil {
		return err
	}
	enc, err := encodePolicy(p)
	if err != nil {
		return err
	}
	launcher, self := findLauncher()
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(withoutOurs(env), envPolicy+"="+enc)
	if self {
		env = append(env, envSelf+"=1")
	}
	cmd.Path = launcher
	cmd.Args = append([]string{launcherName}, args...)
	cmd.Env = env
	return nil
}
