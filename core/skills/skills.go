// Package skills assembles the skill tree a Claude Code session reads:
// one read-only .claude/skills/<plugin>/SKILL.md per healthy plugin, and
// carapace-core/SKILL.md for the core's intrinsic tools (DESIGN.md,
// decision 10).
//
// Each SKILL.md starts with YAML front matter generated from the manifest —
// the plugin's name and a one-line description that lists its tools — then
// a generated reference of the plugin's tools (risk, description, an
// arguments table and an example ipc call built from the argument schema),
// then the plugin's own skills/*.md. The agent therefore always has an
// accurate reference for every tool, even when the author's prose is thin
// or stale; Check reports where the prose and the manifest disagree, for
// `carapace plugin validate`.
//
// # What a plugin controls, and what it does not
//
// A plugin's text reaches the agent's context, so everything taken from it
// is bounded and normalised: descriptions are folded to one line with
// control and invisible characters removed and cut to a length, and the
// front matter's description is written as a YAML double-quoted scalar, so
// no manifest can add a front-matter key or end the block early. Skill
// files are read only from the top level of skills/, only if they are
// regular .md files (no symbolic links: a plugin cannot ship a link to a
// file of the user's), at most MaxSkillFile each and MaxSkillText per
// plugin; files that do not qualify are left out (Check says which and
// why). Plugin names must be kebab-case, so no name can address a path
// outside the tree.
//
// The assembled tree is read-only (files 0444, folders 0555): the agent's
// container mounts it, and the mode is a second line of defence should a
// mount ever be writable. Remove makes it writable again and deletes it.
package skills

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// CoreSkill is the folder of the intrinsics' skill. No plugin may take
// the name.
const CoreSkill = "carapace-core"

// Limits on a plugin's skill text.
const (
	MaxSkillFile = 256 << 10 // bytes in one skills/*.md file
	MaxSkillText = 1 << 20   // bytes of skill files per plugin, in all
	MaxNameLen   = 64        // characters in a plugin (skill) name
	MaxDescLen   = 1024      // characters in the front matter's description
)

// Plugin is one healthy plugin whose skill is to be assembled.
type Plugin struct {
	Name     string             // the plugin's name (its directory name), kebab-case
	Manifest *manifest.Manifest // its parsed manifest
	Skills   fs.FS              // its skills/ folder; nil or a missing folder: none
}

// Intrinsic is one of the core's own tools.
type Intrinsic struct {
	Name        string
	Description string
	Schema      json.RawMessage
}

// IntrinsicsFrom converts catalogue entries (intrinsics.Handler.Tools) to
// Intrinsics, in the same order.
func IntrinsicsFrom(tools []*catalog.Tool) []Intrinsic {
	out := make([]Intrinsic, 0, len(tools))
	for _, t := range tools {
		out = append(out, Intrinsic{Name: t.Name, Description: t.Description, Schema: t.RawSchema})
	}
	return out
}

// Errors of Assemble and Remove.
var (
	// ErrInvalidName: a plugin name is not kebab-case, is too long, is
	// taken twice or is CoreSkill.
	ErrInvalidName = errors.New("invalid plugin name")
	// ErrExists: Assemble's dir already exists.
	ErrExists = errors.New("skill folder already exists")
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// reservedWords may not appear in a skill's name (Agent Skills rule).
var reservedWords = []string{"anthropic", "claude"}

// CheckName reports whether name can be a skill's name and folder:
// kebab-case (a-z, 0-9, single dashes, starting with a letter), at most
// MaxNameLen characters, and without the words Claude reserves ("anthropic",
// "claude"), which would make Claude Code refuse the skill. The core should
// check plugin names with it when it discovers them, so that Assemble never
// meets a bad one.
func CheckName(name string) error {
	if len(name) > MaxNameLen || !nameRE.MatchString(name) {
		return fmt.Errorf("%w %q: names are kebab-case (a-z, 0-9, single dashes), at most %d characters", ErrInvalidName, textutil.Clip(name, 80), MaxNameLen)
	}
	for _, w := range reservedWords {
		if strings.Contains(name, w) {
			return fmt.Errorf("%w %q: a skill's name may not contain %q", ErrInvalidName, name, w)
		}
	}
	return nil
}

// Assemble writes the skill tree into dir, which must not exist; its parent
// must. It writes dir/<plugin>/SKILL.md for every plugin and
// dir/carapace-core/SKILL.md for the intrinsics, then makes the tree
// read-only. Plugin names are checked first; on any error nothing is left
// behind. Plugin skill files that are not regular .md files of bounded size
// are left out (see Check).
func Assemble(dir string, plugins []Plugin, intrinsics []Intrinsic) error {
	return assembleAt(dir, plugins, intrinsics, time.Now())
}

// assembleAt is Assemble with the time the generated examples use: tests
// fix it, so that the skill files match their golden copies.
func assembleAt(dir string, plugins []Plugin, intrinsics []Intrinsic, now time.Time) (err error) {
	seen := map[string]bool{CoreSkill: true}
	for _, p := range plugins {
		if err := CheckName(p.Name); err != nil {
			return fmt.Errorf("assemble skills: %w", err)
		}
		if seen[p.Name] {
			return fmt.Errorf("assemble skills: %w %q: taken twice (or reserved for the core)", ErrInvalidName, p.Name)
		}
		seen[p.Name] = true
		if p.Manifest == nil {
			return fmt.Errorf("assemble skills: plugin %s has no manifest", p.Name)
		}
	}
	for _, in := range intrinsics {
		if err := manifest.CheckToolName(in.Name); err != nil {
			return fmt.Errorf("assemble skills: intrinsic: %w", err)
		}
	}

	// Render everything before touching the disk.
	type skill struct {
		name string
		text []byte
	}
	var out []skill
	sorted := slices.Clone(plugins)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, p := range sorted {
		files, _, err := readSkills(p.Name, p.Skills)
		if err != nil {
			return fmt.Errorf("assemble skills: plugin %s: %w", p.Name, err)
		}
		out = append(out, skill{p.Name, renderPlugin(p, files, now)})
	}
	out = append(out, skill{CoreSkill, renderCore(intrinsics, now)})

	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("assemble skills: %w: %s", ErrExists, dir)
		}
		return fmt.Errorf("assemble skills: %w", err)
	}
	defer func() {
		if err != nil {
			_ = Remove(dir)
		}
	}()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("assemble skills: %w", err)
	}
	defer root.Close()
	for _, s := range out {
		if err := writeSkill(root, s.name, s.text); err != nil {
			return fmt.Errorf("assemble skills: %s: %w", s.name, err)
		}
	}
	for _, s := range out {
		if err := root.Chmod(filepath.Join(s.name, "SKILL.md"), 0o444); err != nil {
			return fmt.Errorf("assemble skills: %w", err)
		}
		if err := root.Chmod(s.name, 0o555); err != nil {
			return fmt.Errorf("assemble skills: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		return fmt.Errorf("assemble skills: %w", err)
	}
	return nil
}

// writeSkill creates name/SKILL.md inside root. os.Root keeps every path
// inside the tree even if a name were to slip past CheckName.
func writeSkill(root *os.Root, name string, text []byte) error {
	if err := root.Mkdir(name, 0o700); err != nil {
		return err
	}
	f, err := root.OpenFile(filepath.Join(name, "SKILL.md"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Remove deletes a tree written by Assemble, first making its folders
// writable again. A missing dir is not an error. It refuses a dir that is a
// symbolic link, and never follows links inside the tree.
func Remove(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("remove skills: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("remove skills: %s is a symbolic link, not a skill tree", dir)
	case !fi.IsDir():
		return fmt.Errorf("remove skills: %s is not a folder", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("remove skills: %w", err)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir { // WalkDir reports a link as a link, never as a folder
			return os.Chmod(path, 0o700)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove skills: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove skills: %w", err)
	}
	return nil
}
