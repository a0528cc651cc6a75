package plugin

import (
	"encoding/json"
	"errors"
)

// Int reads an integer of a handler's config, arguments or event payload,
// which the core hands over as json.Number (a Go int or int64, or a
// float64 with no fraction, in tests that build them by hand).
func Int(v any) (int64, error) {
	switch n := v.(type) {
	case json.Number:
		return n.Int64()
	case int:
		return int64(n), nil
	case int64:
		return n, nil
	case float64:
		if n == float64(int64(n)) {
			return int64(n), nil
		}
	}
	return 0, errors.New("not an integer")
}
