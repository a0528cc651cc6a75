package applecontainer

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/carapace-dev/carapace/core/runtime"
)

// minMemoryMB is the least memory Apple's API server accepts for a
// container: less cannot boot the VM (ContainersService.swift,
// "minimum memory amount allowed is 200 MiB").
const minMemoryMB = 200

// userRE is what --user takes: name|uid[:gid] (Flags.swift). It must not
// start with '-', or the CLI would read it as an option.
var userRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_.-]*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]*)?$`)

// runArgs returns the arguments of `container run` (after the program's
// name) for s: the package doc explains every flag. It checks s, resolves
// every mount source to its real path and refuses one that does not
// exist; it runs nothing.
func runArgs(s runtime.Spec) ([]string, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	// Apple's container ids need two characters at least
	// (ManagedContainer.nameValid: ^[a-zA-Z0-9][a-zA-Z0-9_.-]+$).
	if len(s.Name) < 2 {
		return nil, fmt.Errorf("container name %q: Apple's container needs 2 characters or more: %w", s.Name, runtime.ErrInvalidSpec)
	}
	user := s.User
	if user == "" {
		user = runtime.AgentUser
	}
	if !userRE.MatchString(user) {
		return nil, fmt.Errorf("user %q is not name|uid[:gid]: %w", user, runtime.ErrInvalidSpec)
	}
	args := []string{"run", "--rm", "--name", s.Name}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		if strings.HasPrefix(k, "-") {
			return nil, fmt.Errorf("label %q: %w", k, runtime.ErrInvalidSpec)
		}
		args = append(args, "--label", k+"="+s.Labels[k])
	}
	args = append(args,
		"--progress", "none", // no progress lines in the agent's stderr
		"--network", "none", "--no-dns",
		"--read-only", "--tmpfs", "/tmp", "--tmpfs", runtime.HomePath,
		"--cap-drop", "ALL", "--init",
		"--user", user,
	)
	// No --security-opt (no no-new-privileges, no seccomp profile) and no
	// --pids-limit: Apple's CLI has neither, and the VM is the boundary.
	// Limits.Pids is therefore ignored.
	lim := s.Limits
	switch {
	case lim.CPUs < 0 || math.IsNaN(lim.CPUs) || math.IsInf(lim.CPUs, 0):
		return nil, fmt.Errorf("cpus %v: %w", lim.CPUs, runtime.ErrInvalidSpec)
	case lim.CPUs > 0: // --cpus takes a whole number (Int64): round up
		args = append(args, "--cpus", strconv.FormatFloat(math.Ceil(lim.CPUs), 'f', 0, 64))
	}
	switch {
	case lim.MemoryMB < 0 || (lim.MemoryMB > 0 && lim.MemoryMB < minMemoryMB):
		return nil, fmt.Errorf("memory %d MiB: Apple's container needs %d MiB or more: %w", lim.MemoryMB, minMemoryMB, runtime.ErrInvalidSpec)
	case lim.MemoryMB > 0:
		args = append(args, "--memory", strconv.Itoa(lim.MemoryMB)+"M")
	}
	vols, err := volumes(s.Mounts, user)
	if err != nil {
		return nil, err
	}
	for _, v := range vols {
		args = append(args, "-v", v)
	}
	for _, e := range s.Env {
		if strings.HasPrefix(e, "-") {
			return nil, fmt.Errorf("environment entry %q: %w", e, runtime.ErrInvalidSpec)
		}
		args = append(args, "-e", e)
	}
	args = append(args, s.Image)
	return append(args, s.Cmd...), nil
}

// volumes returns the -v values of mounts: src:dst or src:dst:ro, with
// each source resolved to its real path.
func volumes(mounts []runtime.Mount, user string) ([]string, error) {
	srcs := make([]string, len(mounts))
	files := make([]bool, len(mounts)) // a regular file: shared through its folder
	for i, m := range mounts {
		src, err := filepath.EvalSymlinks(m.Source)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("mount %d: source %s does not exist: %w", i, m.Source, runtime.ErrInvalidSpec)
		}
		if err != nil {
			return nil, fmt.Errorf("mount %d: resolve source %s: %w", i, m.Source, err)
		}
		src, err = filepath.Abs(src)
		if err != nil {
			return nil, fmt.Errorf("mount %d: resolve source %s: %w", i, m.Source, err)
		}
		// The CLI splits -v on ':' and mount options on ','.
		if strings.ContainsAny(src, ",:\n") {
			return nil, fmt.Errorf("mount %d: source %s resolves to %s, which has ',' or ':': %w", i, m.Source, src, runtime.ErrInvalidSpec)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("mount %d: %w", i, err)
		}
		// Inside the VM the socket is owned by root and has the host
		// socket's mode bits (PR #1751): a non-root agent can connect only
		// if others may write it.
		if fi.Mode().Type() == fs.ModeSocket && !isRoot(user) && fi.Mode().Perm()&0o002 == 0 {
			return nil, fmt.Errorf("mount %d: socket %s has mode %04o: inside Apple's VM it is owned by root, so user %s can connect only if it is writable by others (0666, in a 0700 directory): %w",
				i, src, fi.Mode().Perm(), user, runtime.ErrInvalidSpec)
		}
		srcs[i] = src
		files[i] = fi.Mode().IsRegular()
	}
	if err := checkFileFolders(mounts, srcs, files); err != nil {
		return nil, err
	}
	// Spec.Check refused nested sources as given; symbolic links can
	// still nest the real ones, and Apple silently drops the outer share.
	for i, a := range srcs {
		for j, b := range srcs {
			if i != j && strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/") {
				return nil, fmt.Errorf("mount %d: source %s resolves to %s, inside mount %d's source %s: %w",
					i, mounts[i].Source, a, j, b, runtime.ErrInvalidSpec)
			}
		}
	}
	vols := make([]string, len(mounts))
	for i, m := range mounts {
		vols[i] = srcs[i] + ":" + m.Target
		if m.ReadOnly {
			vols[i] += ":ro"
		}
	}
	return vols, nil
}

// checkFileFolders refuses single-file mounts from one folder that mix
// read-only and writable. Virtiofs shares folders only, so Apple's runtime
// shares a file's folder and bind-mounts the file from it, adding the
// folder's share once per container with the options of the first file
// mounted from it (apple/containerization FileMount.swift, 0.35.0 to
// 0.40.1, that is container 1.1.0 to 1.2.2): after a read-only file, a
// writable one from the same folder is read-only too, and a writable file
// first leaves the folder's share writable under a read-only one.
// Sockets are relayed, not shared, and are left out.
func checkFileFolders(mounts []runtime.Mount, srcs []string, files []bool) error {
	first := map[string]int{} // folder → the first file mount from it
	for i, m := range mounts {
		if !files[i] {
			continue
		}
		dir := filepath.Dir(srcs[i])
		j, ok := first[dir]
		if !ok {
			first[dir] = i
			continue
		}
		if mounts[j].ReadOnly != m.ReadOnly {
			return fmt.Errorf("mount %d (%s → %s, %s) and mount %d (%s → %s, %s) are single files from one folder, %s: "+
				"Apple's container shares that folder once, with the first file's options, so both would be %s; "+
				"mount files from one folder with the same mode, or put them in different folders: %w",
				j, srcs[j], mounts[j].Target, mode(mounts[j].ReadOnly), i, srcs[i], m.Target, mode(m.ReadOnly), dir,
				mode(mounts[j].ReadOnly), runtime.ErrInvalidSpec)
		}
	}
	return nil
}

// mode names a mount's mode.
func mode(readOnly bool) string {
	if readOnly {
		return "read-only"
	}
	return "writable"
}

// isRoot reports whether user (name|uid[:gid]) is the root user.
func isRoot(user string) bool {
	u, _, _ := strings.Cut(user, ":")
	return u == "0" || u == "root"
}
