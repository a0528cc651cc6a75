package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/core/runtime"
)

// Shadows: a session can write to its group's workspace and Claude Code
// state, and both are kept for the group's next session. The places there
// where Claude Code would find instructions, settings or hooks
// (claudemd.ShadowedWorkspace, claudemd.ShadowedClaude) are covered in the
// container by an empty read-only folder or file from the session's agent
// folder, so that what a session left there is not even visible to the
// next. The image's managed settings and `--setting-sources user` already
// keep Claude Code from reading them; the shadows are the second line.
const (
	shadowDir  = "shadow"      // an empty folder, mode 0555
	shadowFile = "shadow-file" // an empty file, mode 0444
)

// writeShadows creates the empty folder and file in the agent folder dir.
func writeShadows(dir string) error {
	if err := os.Mkdir(filepath.Join(dir, shadowDir), 0o555); err != nil {
		return fmt.Errorf("shadow folder: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, shadowFile), nil, 0o444); err != nil {
		return fmt.Errorf("shadow file: %w", err)
	}
	return nil
}

// shadowMounts returns the read-only mounts that cover the shadowed places
// of the workspace and the Claude Code state, from the agent folder dir.
func shadowMounts(dir string) []runtime.Mount {
	var ms []runtime.Mount
	add := func(base string, rels []string) {
		for _, rel := range rels {
			src := shadowFile
			if strings.HasSuffix(rel, "/") {
				src = shadowDir
			}
			ms = append(ms, runtime.Mount{Source: filepath.Join(dir, src), Target: path.Join(base, rel), ReadOnly: true})
		}
	}
	add(runtime.WorkspacePath, claudemd.ShadowedWorkspace)
	add(runtime.ClaudeDir, claudemd.ShadowedClaude)
	return ms
}

// shadowTargets makes each shadowed place under dir exist, as a folder or
// an empty file, so that the engine has a mount point and never creates
// one itself (as root, in the user's folder). It works inside dir only
// (os.Root): a symbolic link a session left on the way is removed, never
// followed out of dir, and something of the wrong kind (a folder named
// CLAUDE.md) is renamed aside, not deleted. A core run as root gives what
// it creates to the agent's user.
func shadowTargets(dir string, rels []string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("shadowed places: %w", err)
	}
	defer root.Close()
	for _, rel := range rels {
		parts := strings.Split(strings.TrimSuffix(rel, "/"), "/")
		for i := range parts {
			p := path.Join(parts[:i+1]...)
			wantDir := i < len(parts)-1 || strings.HasSuffix(rel, "/")
			err := shadowTarget(root, p, wantDir)
			// Made (or moved aside) meanwhile by another preparation of the
			// group's folders (a warm container starting beside a session
			// of the group): look again, and take it only as shadowTarget
			// would.
			for try := 0; (errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist)) && try < 3; try++ {
				err = shadowTarget(root, p, wantDir)
			}
			if err != nil {
				return fmt.Errorf("shadowed place %s in %s: %w", p, dir, err)
			}
		}
	}
	return nil
}

func shadowTarget(root *os.Root, p string, wantDir bool) error {
	fi, err := root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		if err := root.Remove(p); err != nil {
			return fmt.Errorf("remove a symbolic link: %w", err)
		}
	case wantDir && fi.IsDir(), !wantDir && fi.Mode().IsRegular():
		return nil
	default:
		aside := p + ".moved-by-carapace-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		if err := root.Rename(p, aside); err != nil {
			return fmt.Errorf("move aside: %w", err)
		}
	}
	if wantDir {
		err = root.Mkdir(p, 0o700)
	} else {
		var f *os.File
		if f, err = root.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		return err
	}
	if os.Getuid() == 0 {
		return root.Lchown(p, 1000, 1000)
	}
	return nil
}
