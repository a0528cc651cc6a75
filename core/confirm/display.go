package confirm

import (
	"bytes"
	"encoding/json"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/sanitize"
)

// Hidden is one value a confirmation's display does not show as it runs:
// the sanitiser replaced part of it.
type Hidden struct {
	// Path locates the value in the arguments, as the sanitiser writes
	// paths: object keys joined with dots, [i] for array elements, "" for
	// arguments that are a single value. A key that was itself redacted
	// appears redacted.
	Path string
	// Kind says what the hidden text looked like: a sanitize.Kind
	// constant ("private-key", "sensitive-key", …).
	Kind string
	// Chars is how many characters of the value the display does not
	// show; 0 when that cannot be told.
	Chars int
}

// Display returns what people are shown of a call's canonical arguments,
// and what it hides. When the sanitiser finds nothing, display is
// canonical itself, byte for byte, and hidden is nil: what is shown is
// what runs. Otherwise display is the sanitised copy and hidden lists each
// redaction; a surface must not take an approval on it (Gate.Decide
// refuses one, ErrHidden). Arguments that are not JSON are shown as they
// are, hiding nothing (the pipeline never asks for them: it validates
// first).
func Display(canonical []byte) (display []byte, hidden []Hidden) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return canonical, nil
	}
	clean, reds := sanitize.Value(v, "")
	if len(reds) == 0 {
		return canonical, nil
	}
	// Encoded as the pipeline encodes canonical arguments (json.Marshal:
	// sorted keys), so that only the redactions differ.
	b, err := json.Marshal(clean)
	if err != nil {
		// A decoded value always encodes; should it not, show nothing
		// rather than something else.
		return nil, []Hidden{{Kind: sanitize.KindUnencodable}}
	}
	hidden = make([]Hidden, len(reds))
	for i, r := range reds {
		hidden[i] = Hidden{Path: r.Path, Kind: r.Kind, Chars: r.Chars}
	}
	return b, hidden
}

// PreviewPath is the Hidden path of what a preview's display hides: not
// an argument, the preview's text.
const PreviewPath = api.PreviewPath

// DisplayPreview returns what people are shown of a call's preview (a
// tool that declares one: core/plugin's Preview) and what it hides, as
// Display does for arguments: the text itself when the sanitiser finds
// nothing, else its sanitised copy and one Hidden per kind found, at
// PreviewPath. A surface must not take an approval on such a display
// (Gate.Decide refuses one, ErrHidden): what a mail would send must be
// read as it is sent, on the computer (confirm show --raw).
func DisplayPreview(text string) (display string, hidden []Hidden) {
	if text == "" {
		return "", nil
	}
	clean, reds := sanitize.Value(text, "")
	if len(reds) == 0 {
		return text, nil
	}
	display, _ = clean.(string)
	for _, r := range reds {
		hidden = append(hidden, Hidden{Path: PreviewPath, Kind: r.Kind, Chars: r.Chars})
	}
	return display, hidden
}
