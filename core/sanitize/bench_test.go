package sanitize

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A typical small tool result: a handful of short strings, no secret.
var cleanResult = map[string]any{
	"id":        "evt_01HQ3ZK7",
	"title":     "Dentist appointment",
	"start":     "2026-03-05T10:00:00Z",
	"location":  "12 High Street, Leeds",
	"status":    "confirmed",
	"all_day":   false,
	"attendees": json.Number("2"),
}

func BenchmarkValueClean(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Value(cleanResult, "result")
	}
}

func BenchmarkValueSecret(b *testing.B) {
	v := map[string]any{
		"title":  "Dentist appointment",
		"status": "failed",
		"detail": "upstream said: 401 for Authorization: Bearer " + fake("sk-ant-api03-", 93),
	}
	b.ReportAllocs()
	for b.Loop() {
		Value(v, "result")
	}
}

func BenchmarkStringClean(b *testing.B) {
	s := "Could not reach the calendar server at 10:30; will retry in 5 minutes."
	b.ReportAllocs()
	for b.Loop() {
		String(s)
	}
}

func BenchmarkStringSecret(b *testing.B) {
	s := "request failed: 401 Unauthorized (Authorization: Bearer " + fake("sk-ant-api03-", 93) + ")"
	b.ReportAllocs()
	for b.Loop() {
		String(s)
	}
}

// BenchmarkStringPathological times the inputs of
// TestPathologicalInputsStayLinear at two sizes; ns/op per byte should be
// about the same at both.
func BenchmarkStringPathological(b *testing.B) {
	for _, unit := range pathologicalUnits {
		for _, n := range []int{64 << 10, 256 << 10} {
			s := strings.Repeat(unit, n/len(unit))
			b.Run(fmt.Sprintf("%q/%dKiB", unit, n>>10), func(b *testing.B) {
				b.SetBytes(int64(len(s)))
				for b.Loop() {
					String(s)
				}
			})
		}
	}
}
