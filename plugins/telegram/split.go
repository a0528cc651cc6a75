package telegram

import (
	"strings"
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
		end, units := 0, 0 // the longest prefix that fits, in bytes
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
