package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ManifestFile is the name of the manifest in a plugin's folder.
const ManifestFile = "manifest.json"

// SkillsDir is the folder of a plugin's skill files (*.md).
const SkillsDir = "skills"

// MaxSize is the largest manifest.json accepted (1 MiB).
const MaxSize = 1 << 20

// Load reads and parses dir/manifest.json. It refuses a manifest larger than
// MaxSize (reading no more than that), one that is not a regular file, and
// one that is a symbolic link leading outside dir: what a reviewer reads in
// the plugin's folder is what the core loads. The error is an *Error.
func Load(dir string, opts Options) (*Manifest, error) {
	_, m, probs := load(dir, opts)
	if errs := errorsOnly(probs); len(errs) > 0 {
		return nil, &Error{Problems: errs}
	}
	return m, nil
}

func load(dir string, opts Options) (map[string]any, *Manifest, []Problem) {
	file := filepath.Join(dir, ManifestFile)
	data, p := readManifest(dir, file)
	if p != nil {
		return nil, nil, []Problem{*p}
	}
	return parse(file, data, opts)
}

// readManifest reads the manifest file within its limits.
func readManifest(dir, file string) ([]byte, *Problem) {
	fail := func(msg, fix string) ([]byte, *Problem) {
		return nil, &Problem{File: file, Message: msg, Fix: fix}
	}
	fi, err := os.Lstat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail("the plugin has no manifest.json", "create manifest.json in the plugin's folder")
	case err != nil:
		return fail("cannot read the manifest: "+pathErr(err), "make the file readable")
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(file)
		if err != nil {
			return fail("is a symbolic link that cannot be followed: "+pathErr(err), "replace the link with the file itself")
		}
		root, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return fail("cannot resolve the plugin's folder: "+pathErr(err), "check the folder")
		}
		if !within(root, target) {
			return fail(fmt.Sprintf("is a symbolic link to %s, outside the plugin's folder", target), "replace the link with a copy of the file")
		}
	}
	// Stat (following a link) before opening: opening a FIFO would block.
	if fi, err = os.Stat(file); err != nil {
		return fail("cannot read the manifest: "+pathErr(err), "make the file readable")
	}
	if !fi.Mode().IsRegular() {
		return fail("is not a regular file", "make manifest.json a plain file")
	}
	if fi.Size() > MaxSize {
		return fail(fmt.Sprintf("is %d bytes; a manifest may be at most %d (1 MiB)", fi.Size(), MaxSize), "shrink the manifest")
	}
	f, err := os.Open(file)
	if err != nil {
		return fail("cannot read the manifest: "+pathErr(err), "make the file readable")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return fail("cannot read the manifest: "+pathErr(err), "make the file readable")
	}
	if len(data) > MaxSize {
		return fail(fmt.Sprintf("is larger than %d bytes (1 MiB)", MaxSize), "shrink the manifest")
	}
	return data, nil
}

// within reports whether path is root or below it (both resolved).
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// pathErr is an error without the path it repeats.
func pathErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Check validates a plugin folder the way `carapace plugin validate` does,
// in the six stages of the plugin authoring guide, and returns every
// problem, errors and warnings, sorted by file and pointer:
//
//  1. JSON syntax of manifest.json (and Load's limits: size, regular file,
//     no symbolic link out of the folder);
//  2. the manifest schema and the rules of Parse;
//  3. tool names unique within the manifest;
//  4. "additionalProperties": false at every level of every arguments_schema;
//  5. skills/ holds at least one .md file: an error when the plugin declares
//     tools (the agent would not learn them), else a warning;
//  6. a warning for each high-risk tool.
//
// Symbolic links under skills/ (or skills/ itself being one) are errors: the
// core copies skill files into the agent's container, and a link could carry
// any file of the user's into it. The folder's name is checked with
// CheckPluginName as a warning (the installer may choose another name). The
// manifest is nil when there is any error.
func Check(dir string, opts Options) (*Manifest, []Problem) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		msg := "is not a folder"
		if err != nil {
			msg = "cannot be read: " + pathErr(err)
		}
		return nil, []Problem{{File: dir, Message: msg, Fix: "give the path of the plugin's folder"}}
	}
	tree, m, probs := load(dir, opts)
	if abs, err := filepath.Abs(dir); err == nil {
		if msg, fix := pluginNameIssue(filepath.Base(abs)); msg != "" {
			probs = append(probs, Problem{File: dir, Message: "the folder's name is not a valid plugin name: " + msg,
				Fix: "install the plugin under a valid name: " + fix, Warning: true})
		}
	}
	tools, _ := lookupArray(tree, "/provides/tools")
	// A manifest that could not be read may still declare tools: assume so.
	hasTools := len(tools) > 0 || tree == nil
	probs = append(probs, checkSkills(dir, hasTools)...)
	for i, t := range tools {
		tool, _ := t.(map[string]any)
		if tool["risk_level"] != RiskHigh {
			continue
		}
		name, _ := tool["name"].(string)
		probs = append(probs, Problem{File: filepath.Join(dir, ManifestFile), Pointer: "/provides/tools/" + strconv.Itoa(i) + "/risk_level",
			Message: fmt.Sprintf("tool %q is high-risk: calls to %s wait for the user's confirmation", name, name),
			Fix:     `keep "high" for tools that change or send something; use "low" for read-only tools`, Warning: true})
	}
	sortProblems(probs)
	if len(errorsOnly(probs)) > 0 {
		m = nil
	}
	return m, probs
}

// checkSkills is stage 5: skills/ holds at least one regular .md file and no
// symbolic links.
func checkSkills(dir string, hasTools bool) []Problem {
	skills := filepath.Join(dir, SkillsDir)
	none := func(msg string) []Problem {
		p := Problem{File: skills, Message: msg, Fix: "write skills/<plugin>.md teaching the agent the plugin's tools", Warning: !hasTools}
		if hasTools {
			p.Message += ": the agent would not learn the plugin's tools"
		}
		return []Problem{p}
	}
	fi, err := os.Lstat(skills)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return none("the plugin has no skills folder")
	case err != nil:
		return []Problem{{File: skills, Message: "cannot be read: " + pathErr(err), Fix: "make the folder readable"}}
	case fi.Mode()&fs.ModeSymlink != 0:
		return []Problem{{File: skills, Message: "is a symbolic link", Fix: "replace the link with a real folder: skill files are copied into the agent's container"}}
	case !fi.IsDir():
		return []Problem{{File: skills, Message: "is not a folder", Fix: "make skills a folder of .md files"}}
	}
	entries, err := os.ReadDir(skills)
	if err != nil {
		return []Problem{{File: skills, Message: "cannot be read: " + pathErr(err), Fix: "make the folder readable"}}
	}
	var probs []Problem
	count := 0
	for _, e := range entries {
		path := filepath.Join(skills, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			probs = append(probs, Problem{File: path, Message: "is a symbolic link",
				Fix: "replace the link with the file itself: skill files are copied into the agent's container, and a link could carry any file into it"})
		case strings.HasPrefix(e.Name(), "."):
			// Editor and Finder litter (.DS_Store) is not a skill.
		case e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".md"):
			count++
			if info, err := e.Info(); err == nil && info.Size() == 0 {
				probs = append(probs, Problem{File: path, Message: "is empty", Fix: "teach the agent the plugin's tools in it", Warning: true})
			}
		default:
			probs = append(probs, Problem{File: path, Message: "is not a .md file; it is ignored", Fix: "remove it, or rename it to .md if it is a skill", Warning: true})
		}
	}
	if count == 0 {
		probs = append(probs, none("the skills folder holds no .md file")...)
	}
	return probs
}
