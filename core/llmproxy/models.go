package llmproxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// checkModel returns why body, a request that passed checkBody, must not
// be forwarded for a group limited to the models allowed, or nil.
//
// It reads the top-level keys the way checkBody does, so that a reader
// that disagrees cannot be used to slip a model past it: every key that
// is "model" in any case is checked (a key written twice is checked
// twice, whichever one the upstream keeps), and each must be a string
// naming an allowed model exactly. A request that names no model is
// refused too: the upstream's own default is not the group's choice.
func checkModel(body []byte, group string, allowed []string) *bodyError {
	refuse := func(named string) *bodyError {
		return &bodyError{status: http.StatusForbidden, typ: "permission_error", code: CodeModelNotAllowed, field: "model",
			msg: "Carapace: group " + group + " may use only the models " + strings.Join(allowed, ", ") + "; this request names " + named +
				" (the group's models are set in config.toml, [groups." + group + "] models)"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return refuse("no model")
	}
	seen := false
	var raw json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return refuse("no readable model")
		}
		key, _ := tok.(string)
		if !strings.EqualFold(key, "model") {
			if err := dec.Decode(&raw); err != nil {
				return refuse("no readable model")
			}
			continue
		}
		seen = true
		tok, err = dec.Token()
		if err != nil {
			return refuse("no readable model")
		}
		m, ok := tok.(string)
		if !ok {
			return refuse("a model that is not a string")
		}
		if !slices.Contains(allowed, m) {
			return refuse(strconv.Quote(cleanModel(m)))
		}
	}
	if !seen {
		return refuse("no model")
	}
	return nil
}
