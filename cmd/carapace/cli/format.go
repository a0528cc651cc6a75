package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/internal/textutil"
)

// printable makes a string from the core or the audit log safe to print on
// a terminal (textutil.Printable: non-printable runes become \u escapes).
// The escaping lives in internal/textutil, shared with the menu-bar app.
func printable(s string) string { return textutil.Printable(s) }

// oneLine folds a message onto one line (textutil.OneLine).
func oneLine(s string) string { return textutil.OneLine(s) }

// isPrint reports whether r is safe to print as is.
func isPrint(r rune) bool { return textutil.IsPrint(r) }

// truncate cuts s to at most n characters, marking the cut with "…" (no
// limit if n <= 0): textutil.ClipRunes.
func truncate(s string, n int) string { return textutil.ClipRunes(s, n) }

// compactJSON returns raw JSON on one line, printable, at most n runes (no
// limit if n <= 0).
func compactJSON(raw json.RawMessage, n int) string {
	if len(raw) == 0 {
		return "-"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "(arguments are not valid JSON)"
	}
	return truncate(printable(b.String()), n)
}

// indentJSON returns raw JSON indented, each line after prefix, printable:
// every value whole (invisible characters as \u escapes).
func indentJSON(raw json.RawMessage, prefix string) string {
	if len(raw) == 0 {
		return prefix + "-"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return prefix + "(arguments are not valid JSON)"
	}
	lines := strings.Split(b.String(), "\n") // JSON escapes the line breaks inside values
	for i, l := range lines {
		lines[i] = prefix + printable(l)
	}
	return strings.Join(lines, "\n")
}

// orDash returns s printable, or "-" for an empty s.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return printable(s)
}

// age formats a duration for humans, to the second.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String()
}

// writeJSON prints v as indented JSON, terminal-safe (see escapeJSON).
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(escapeJSON(b), '\n'))
	return err
}

// writeJSONLine prints v as one line of JSON, terminal-safe.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(escapeJSON(b), '\n'))
	return err
}

// escapeJSON rewrites the non-printable runes of encoded JSON as \u
// escapes, so that --json output is as safe on a terminal as the tables.
// encoding/json already escapes C0 controls; this catches C1 controls and
// other invisible runes, which can only occur inside strings, where an
// escape means the same. The result decodes to the same value.
func escapeJSON(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r < utf8.RuneSelf || isPrint(r) || r == utf8.RuneError && size == 1 {
			if out != nil {
				out = append(out, b[i:i+size]...)
			}
			i += size
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+16), b[:i]...)
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	if out == nil {
		return b
	}
	return out
}

// table returns a tabwriter for aligned columns; Flush it.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// printTable writes list as a table: header, then row(e) for each element
// (columns separated by tabs), or the line none when list is empty.
func printTable[T any](out io.Writer, list []T, none, header string, row func(T) string) error {
	if len(list) == 0 {
		fmt.Fprintln(out, none)
		return nil
	}
	tw := table(out)
	fmt.Fprintln(tw, header)
	for _, e := range list {
		fmt.Fprintln(tw, row(e))
	}
	return tw.Flush()
}
