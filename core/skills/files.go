package skills

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"sort"
	"strings"
)

// skillFile is one skills/*.md file that qualified.
type skillFile struct {
	Name string // file name within skills/
	Raw  string // the text as read (CRLF folded to LF), for Check's line numbers
	Text string // the text as written into SKILL.md
	// Notes on what was changed between Raw and Text.
	Notes []string
}

// leftOut is a skills/ entry that did not qualify, and why.
type leftOut struct {
	Name string
	Why  string
}

var fileNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*\.md$`)

// readSkills reads the qualifying files of a plugin's skills folder: the
// top-level regular *.md files, <plugin>.md first and the others by name,
// each at most MaxSkillFile bytes and MaxSkillText in all. A missing folder
// has none. Only an unreadable folder or file is an error.
func readSkills(plugin string, fsys fs.FS) ([]skillFile, []leftOut, error) {
	if fsys == nil {
		return nil, nil, nil
	}
	entries, err := fs.ReadDir(fsys, ".")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read skills folder: %w", err)
	}
	main := plugin + ".md"
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := entries[i].Name(), entries[j].Name()
		if (a == main) != (b == main) {
			return a == main
		}
		return a < b
	})
	var files []skillFile
	var out []leftOut
	total := 0
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // editor and system files: .DS_Store, .swp
		}
		why, err := disqualified(fsys, e)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			out = append(out, leftOut{name, why})
			continue
		}
		data, err := readBounded(fsys, name)
		if err != nil {
			return nil, nil, err
		}
		if len(data) > MaxSkillFile {
			out = append(out, leftOut{name, fmt.Sprintf("larger than %d KiB", MaxSkillFile>>10)})
			continue
		}
		if total+len(data) > MaxSkillText {
			out = append(out, leftOut{name, fmt.Sprintf("the plugin's skill files exceed %d KiB in all", MaxSkillText>>10)})
			continue
		}
		total += len(data)
		files = append(files, cleanSkill(name, string(data)))
	}
	return files, out, nil
}

// disqualified says why a skills/ entry is left out, or "".
func disqualified(fsys fs.FS, e fs.DirEntry) (string, error) {
	name := e.Name()
	mode := e.Type()
	if rl, ok := fsys.(fs.ReadLinkFS); ok { // a file system with links: ask it directly
		fi, err := rl.Lstat(name)
		if err != nil {
			return "", fmt.Errorf("read skills folder: %w", err)
		}
		mode = fi.Mode().Type()
	}
	switch {
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link (skill files must be regular files)", nil
	case mode.IsDir():
		return "a folder (only the top level of skills/ is read)", nil
	case !mode.IsRegular():
		return "not a regular file", nil
	case !strings.HasSuffix(name, ".md"):
		return "not a .md file", nil
	case !fileNameRE.MatchString(name):
		return "the name has characters other than letters, digits, '.', '_' and '-'", nil
	}
	return "", nil
}

// readBounded reads at most MaxSkillFile+1 bytes of name.
func readBounded(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read skill file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSkillFile+1))
	if err != nil {
		return nil, fmt.Errorf("read skill file %s: %w", name, err)
	}
	return data, nil
}

// cleanSkill normalises a skill file's text for SKILL.md: valid UTF-8, LF
// line ends, no NULs, no invisible characters that could hide text from a
// human reader (bidi overrides, Unicode tags), no front matter of its own
// (the core writes the front matter), and a final newline.
func cleanSkill(name, data string) skillFile {
	f := skillFile{Name: name}
	raw := strings.ReplaceAll(data, "\r\n", "\n")
	f.Raw = raw
	text := raw
	if v := strings.ToValidUTF8(text, "\uFFFD"); v != text {
		text = v
		f.Notes = append(f.Notes, "invalid UTF-8 replaced")
	}
	if v := stripInvisible(text); v != text {
		text = v
		f.Notes = append(f.Notes, "control and invisible characters (bidi overrides, Unicode tags) removed")
	}
	if rest, ok := cutFrontMatter(text); ok {
		text = rest
		f.Notes = append(f.Notes, "its front matter is ignored: the core generates SKILL.md's front matter from manifest.json")
	}
	text = strings.TrimLeft(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	f.Text = text
	return f
}

// invisible reports characters removed from skill text: C0 controls other
// than tab and newline, DEL, C1 controls, bidi embeddings, overrides and
// isolates, and the Unicode tag block.
func invisible(r rune) bool {
	switch {
	case r < 0x20 && r != '\t' && r != '\n', r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r >= 0xe0000 && r <= 0xe007f:
		return true
	}
	return false
}

func stripInvisible(s string) string {
	if strings.IndexFunc(s, invisible) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if invisible(r) {
			return -1
		}
		return r
	}, s)
}

// cutFrontMatter removes a leading "---" … "---" block.
func cutFrontMatter(s string) (string, bool) {
	if !strings.HasPrefix(s, "---\n") {
		return s, false
	}
	rest := s[len("---\n"):]
	for off := 0; off < len(rest); {
		line, _, _ := strings.Cut(rest[off:], "\n")
		if strings.TrimRight(line, " \t") == "---" || strings.TrimRight(line, " \t") == "..." {
			end := off + len(line)
			if end < len(rest) {
				end++
			}
			return rest[end:], true
		}
		off += len(line) + 1
	}
	return s, false
}
