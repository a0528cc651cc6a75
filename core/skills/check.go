package skills

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Warning is one problem Check found. It never stops a plugin from loading:
// it says where the agent would be misled or under-informed.
type Warning struct {
	File    string // relative to the plugin folder: "manifest.json", "skills/x.md"
	Line    int    // 1-based; 0 when the warning is about the whole file
	Message string
}

// String renders the warning as file:line: message.
func (w Warning) String() string {
	if w.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Message)
	}
	return w.File + ": " + w.Message
}

var (
	// invokeRE finds tool.invoke.<name>; the name may be mistyped with
	// dots or dashes, which are reported as such.
	invokeRE = regexp.MustCompile(`tool\.invoke\.([A-Za-z0-9_][A-Za-z0-9_.-]*)`)
	// headingRE is an ATX heading; its text is group 1.
	headingRE = regexp.MustCompile("^ {0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$")
	// snakeRE is an identifier that looks like a tool name: snake_case
	// with at least one underscore.
	snakeRE = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+$`)
	fenceRE = regexp.MustCompile("^ {0,3}(```|~~~)")
)

// Check compares a plugin's skill files with its manifest, for `carapace
// plugin validate`. It warns about:
//
//   - every tool-looking name the skill text uses that the manifest does not
//     declare (and that is not an intrinsic): each tool.invoke.<name>, and
//     each Markdown heading that is exactly a snake_case identifier with an
//     underscore, such as "## search_notes" — with its file and line;
//   - every declared tool that no skill file mentions;
//   - skill files Assemble leaves out (links, folders, other extensions,
//     oversize) and what it changes (its own front matter, invisible
//     characters);
//   - an empty or over-long description, and tools for which no example
//     call can be generated from the schema.
//
// Warnings are sorted by file, line and message.
func Check(m *manifest.Manifest, skills fs.FS) []Warning {
	if m == nil {
		return []Warning{{File: "manifest.json", Message: "no manifest to check the skills against"}}
	}
	var ws []Warning
	add := func(file string, line int, format string, args ...any) {
		ws = append(ws, Warning{File: file, Line: line, Message: fmt.Sprintf(format, args...)})
	}

	known := map[string]bool{}
	var names []string
	for _, t := range m.Provides.Tools {
		known[t.Name] = true
		names = append(names, t.Name)
	}
	for _, r := range manifest.ReservedTools {
		known[r] = true
	}

	if strings.TrimSpace(m.Description) == "" {
		add("manifest.json", 0, "the description is empty; it is what tells the agent when to use the plugin's skill")
	} else if n := utf8.RuneCountInString(fold(m.Description, 1<<20)) + len(" Tools: "+strings.Join(names, ", ")+"."); n > MaxDescLen {
		add("manifest.json", 0, "the description is longer than SKILL.md's front matter allows (%d characters with the tool names); it is cut", MaxDescLen)
	}
	if strings.ContainsAny(m.Description, "<>") {
		add("manifest.json", 0, "the description's '<' and '>' become '‹' and '›' in SKILL.md's front matter, where tags are not allowed")
	}
	for _, t := range m.Provides.Tools {
		if _, err := SampleArguments(t.ArgumentsSchema, time.Now()); err != nil {
			add("manifest.json", 0, "tool %s: SKILL.md shows no example call: %v", t.Name, err)
		}
	}

	// The name only orders <plugin>.md first, which does not matter here.
	files, out, err := readSkills("", skills)
	if err != nil {
		add("skills/", 0, "cannot read the skill files: %v", err)
	}
	for _, o := range out {
		add("skills/"+o.Name, 0, "left out of SKILL.md: %s", o.Why)
	}
	if err == nil && len(files) == 0 {
		add("skills/", 0, "no .md skill file; the agent learns the tools only from the generated reference")
	}

	mentioned := map[string]bool{}
	for _, f := range files {
		file := "skills/" + f.Name
		for _, n := range f.Notes {
			add(file, 0, "%s", n)
		}
		for _, name := range names {
			if !mentioned[name] && containsWord(f.Raw, name) {
				mentioned[name] = true
			}
		}
		inFence := false
		for i, line := range strings.Split(f.Raw, "\n") {
			if fenceRE.MatchString(line) {
				inFence = !inFence
				continue
			}
			for _, mm := range invokeRE.FindAllStringSubmatch(line, -1) {
				name := strings.TrimRight(mm[1], ".-")
				if known[name] || name == "" {
					continue
				}
				if err := manifest.CheckToolName(name); err != nil {
					add(file, i+1, "tool.invoke.%s: the manifest declares no such tool (and %v)", textutil.Clip(name, 80), err)
				} else {
					add(file, i+1, "tool.invoke.%s: the manifest declares no such tool", name)
				}
			}
			if inFence {
				continue
			}
			if h := headingRE.FindStringSubmatch(line); h != nil {
				text := strings.Trim(h[1], "`")
				if snakeRE.MatchString(text) && !known[text] {
					add(file, i+1, "heading %q looks like a tool name, but the manifest declares no such tool", text)
				}
			}
		}
	}
	for _, name := range names {
		if !mentioned[name] && len(files) > 0 {
			add("manifest.json", 0, "tool %s is declared but no skill file mentions it", name)
		}
	}

	sort.SliceStable(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Message < b.Message
	})
	return ws
}

// containsWord reports whether name occurs in s delimited by characters that
// cannot be part of a tool name.
func containsWord(s, name string) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], name)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(name)
		if (i == 0 || !identByte(s[i-1])) && (end == len(s) || !identByte(s[end])) {
			return true
		}
		off = i + 1
	}
}

func identByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
