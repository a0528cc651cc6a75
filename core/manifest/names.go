package manifest

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest tool or plugin name.
const MaxNameLen = 64

var (
	toolNameRE   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	pluginNameRE = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
)

// ReservedTools are the core intrinsics; no plugin may declare them.
var ReservedTools = []string{"list_tools", "get_session_info", "get_diagnostics"}

// ReservedPlugins are plugin (folder) names the core keeps for itself, so
// that no installed plugin can pass for part of the core in the catalogue,
// the audit log, notifications or the CLI:
//   - "core" is the owner of the intrinsic tools in the catalogue and the
//     audit log (intrinsics.Plugin);
//   - "carapace" is the product's own name;
//   - "carapace-core" is the folder of the intrinsics' generated skill in
//     every session's skill tree (core/skills);
//   - "carapace-llm" holds the model API's credential in the keychain
//     (keychain.LLMPlugin): a plugin of that name could read it;
//   - "carapace-prove" is the probe plugin of `carapace doctor --prove`
//     (core/prove), whose data folder the proof clears;
//   - "installer", "test-input" and "hello" are the seeds' built-in modules
//     (the plugin installer, the development input channel and the greeting
//     module), kept so that a later built-in can take them without
//     colliding with an installed plugin.
var ReservedPlugins = []string{"core", "carapace", "carapace-core", "carapace-llm", "carapace-prove", "installer", "test-input", "hello"}

// CheckToolName enforces tool names: snake_case (^[a-z][a-z0-9_]*$), at most
// 64 characters, plain ASCII. For a dot- or dash-separated name the error
// suggests the snake_case form ("memory.store": use "memory_store"). It does
// not check ReservedTools; Parse does.
func CheckToolName(name string) error {
	if msg, fix := toolNameIssue(name); msg != "" {
		return errors.New(msg + ": " + fix)
	}
	return nil
}

// toolNameIssue says what is wrong with a tool name, and how to fix it.
func toolNameIssue(name string) (msg, fix string) {
	q := fmt.Sprintf("tool name %q", name)
	switch {
	case name == "":
		return "tool name is empty", `name the tool in snake_case, such as "my_tool"`
	case len(name) > MaxNameLen:
		return fmt.Sprintf("%s is %d bytes long; the limit is %d", q, len(name), MaxNameLen), fmt.Sprintf("shorten it to at most %d characters", MaxNameLen)
	case toolNameRE.MatchString(name):
		return "", ""
	}
	if i, r, ok := firstNonASCII(name); ok {
		return fmt.Sprintf("%s contains the non-ASCII character %q (U+%04X) at character %d", q, r, r, i),
			"type the name in plain ASCII (a-z, 0-9, _): letters from other scripts can look identical to Latin ones"
	}
	s := strings.ToLower(strings.NewReplacer(".", "_", "-", "_", " ", "_").Replace(name))
	if toolNameRE.MatchString(s) {
		return q + " must be snake_case", fmt.Sprintf("use %q", s)
	}
	return q + " must match ^[a-z][a-z0-9_]*$", "start with a lower-case letter and use only a-z, 0-9 and _"
}

// CheckPluginName enforces plugin (folder) names: kebab-case
// (^[a-z][a-z0-9]*(-[a-z0-9]+)*$), at most 64 characters, and not one of
// ReservedPlugins. For a name such as "My_Plugin" the error suggests the
// kebab-case form ("my-plugin").
func CheckPluginName(name string) error {
	if msg, fix := pluginNameIssue(name); msg != "" {
		return errors.New(msg + ": " + fix)
	}
	return nil
}

func pluginNameIssue(name string) (msg, fix string) {
	q := fmt.Sprintf("plugin name %q", name)
	switch {
	case name == "":
		return "plugin name is empty", `name the plugin in kebab-case, such as "my-plugin"`
	case len(name) > MaxNameLen:
		return fmt.Sprintf("%s is %d bytes long; the limit is %d", q, len(name), MaxNameLen), fmt.Sprintf("shorten it to at most %d characters", MaxNameLen)
	case slices.Contains(ReservedPlugins, name):
		return q + " is reserved by the core", fmt.Sprintf("choose another name (reserved: %s)", strings.Join(ReservedPlugins, ", "))
	case pluginNameRE.MatchString(name):
		return "", ""
	}
	if i, r, ok := firstNonASCII(name); ok {
		return fmt.Sprintf("%s contains the non-ASCII character %q (U+%04X) at character %d", q, r, r, i),
			"type the name in plain ASCII (a-z, 0-9, -)"
	}
	if s := kebab(name); pluginNameRE.MatchString(s) && len(s) <= MaxNameLen && !slices.Contains(ReservedPlugins, s) {
		return q + " must be kebab-case", fmt.Sprintf("use %q", s)
	}
	return q + " must match ^[a-z][a-z0-9]*(-[a-z0-9]+)*$", "start with a lower-case letter and use only a-z, 0-9 and single hyphens between words"
}

// kebab splits a name into words at separators and lower-to-upper case
// changes ("My_Plugin", "myPlugin", "my.plugin") and joins them with "-".
func kebab(name string) string {
	var words []string
	var cur []rune
	var prev rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, string(cur))
			cur = cur[:0]
		}
	}
	for _, r := range name {
		switch {
		case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)) {
				flush()
			}
			cur = append(cur, unicode.ToLower(r))
		default:
			flush()
		}
		prev = r
	}
	flush()
	return strings.Join(words, "-")
}

// firstNonASCII finds the first non-ASCII character and its 1-based position.
func firstNonASCII(s string) (pos int, r rune, ok bool) {
	for _, c := range s {
		pos++
		if c >= utf8.RuneSelf {
			return pos, c, true
		}
	}
	return 0, 0, false
}

// nearest returns the candidate closest to s when it is a plausible
// misspelling (same letters ignoring case and separators, or at most two
// edits away), else "".
func nearest(s string, candidates []string) string {
	norm := func(x string) string { return strings.ToLower(separators.Replace(x)) }
	best, bestD := "", 3
	for _, c := range candidates {
		if norm(c) == norm(s) {
			return c
		}
		limit := 2
		if len(c) <= 4 {
			limit = 1
		}
		if d := editDistance(strings.ToLower(s), c, limit+1); d <= limit && d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

var separators = strings.NewReplacer("_", "", "-", "", " ", "", ".", "")

// editDistance is the optimal-string-alignment distance of a and b
// (Levenshtein plus transpositions of neighbours: "bdoy" is one edit from
// "body"), giving up (returning max) once it exceeds max.
func editDistance(a, b string, max int) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 200 || len(rb) > 200 {
		return max
	}
	if d := len(ra) - len(rb); d > max || -d > max {
		return max
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return min(d[len(ra)][len(rb)], max)
}
