package plugin

import (
	"encoding/json"
	"testing"
)

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int64
		ok   bool
	}{
		{json.Number("42"), 42, true}, {json.Number("-7"), -7, true}, {7, 7, true}, {int64(9), 9, true}, {3.0, 3, true},
		{json.Number("1.5"), 0, false}, {1.5, 0, false}, {"42", 0, false}, {nil, 0, false}, {true, 0, false},
	} {
		got, err := Int(tc.v)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("Int(%#v) = %d, %v; want %d, ok %v", tc.v, got, err, tc.want, tc.ok)
		}
	}
}
