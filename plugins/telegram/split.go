package telegram

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessage is the longest text of one Telegram message, in UTF-16 code
// units (what Telegram counts).
const MaxMessage = 4096

// Split cuts text into pieces of at most max UTF-16 code units each whose
// concatenation is text. It cuts after a blank line if one falls in the
// second half of the piece, else after a line break, else after a space,
// else between two characters — never inside a character, so never
// between the two halves of a surrogate pair (an astral character such as
// an emoji counts 2 units and stays whole). max below 2 counts as 2.
func Split(text string, max int) []string {
	max = maxInt(max, 2)
	var out []string
	for text != "" {
		end := fits(text, max)
		if end >= len(text) {
			out = append(out, text)
			break
		}
		cut := end
		head := text[:end]
		for _, sep := range []string{"\n\n", "\n", " "} {
			if i := strings.LastIndex(head, sep); i >= 0 && i+len(sep) > end/2 {
				cut = i + len(sep)
				break
			}
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
	return out
}

// fits returns the length in bytes of the longest prefix of text that is
// at most max UTF-16 code units, never cutting a character.
func fits(text string, max int) int {
	end, units := 0, 0
	for i, r := range text {
		u := 1
		if r > 0xFFFF {
			u = 2
		}
		if units+u > max {
			break
		}
		units += u
		end = i + runeLenAt(text, i)
	}
	return end
}

// runeLenAt is the byte length of the (possibly invalid) rune at s[i]: 1
// for a byte that starts no valid sequence, as range decodes it.
func runeLenAt(s string, i int) int {
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// SplitExact cuts text into pieces of at most max UTF-16 code units each
// whose concatenation is text, such that each piece shows every byte of
// it even though Telegram trims a message's leading and trailing white
// space: a piece ends after a line break (a line break, and the
// indentation after it, carry nothing of a value: a JSON string writes
// its own as \n), or between two characters that are not white space.
// It cuts after the last line break in the second half of a piece, else
// at the last such boundary, else after any line break. ok is false when
// a piece has no such place to end (a run of spaces longer than a
// message): the pieces then are nil.
func SplitExact(text string, max int) (pieces []string, ok bool) {
	max = maxInt(max, 2)
	for text != "" {
		end := fits(text, max)
		if end >= len(text) {
			return append(pieces, text), true
		}
		cut := exactCut(text, end)
		if cut <= 0 {
			return nil, false
		}
		pieces = append(pieces, text[:cut])
		text = text[cut:]
	}
	return pieces, true
}

// exactCut returns where to end a piece of text at most end bytes long
// (see SplitExact), or 0 when there is no such place.
func exactCut(text string, end int) int {
	head := text[:end]
	if i := strings.LastIndexByte(head, '\n'); i >= 0 && i+1 > end/2 {
		return i + 1
	}
	prev := -1 // the start of the last rune seen
	for i := end; i > 0; i = prev {
		r, _ := utf8.DecodeLastRuneInString(text[:i])
		prev = i - runeLenBefore(text, i)
		next, _ := utf8.DecodeRuneInString(text[i:])
		if !unicode.IsSpace(r) && !unicode.IsSpace(next) && r != '\n' {
			return i
		}
	}
	if i := strings.LastIndexByte(head, '\n'); i >= 0 {
		return i + 1
	}
	return 0
}

// runeLenBefore is the byte length of the rune that ends at s[:i].
func runeLenBefore(s string, i int) int {
	_, n := utf8.DecodeLastRuneInString(s[:i])
	return max(n, 1)
}
