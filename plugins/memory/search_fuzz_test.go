package memory

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// FuzzSearch: no query text fails a search, and the text means only its
// words — the same search as the words alone, separated by spaces.
func FuzzSearch(f *testing.F) {
	for _, s := range []string{"", "dog", `"dog`, "NEAR(dog cat)", "content:luna", "{content tags}: x*", "dog AND cat",
		"^dog -cat +fish", "(", `"""`, "\x00", "l'été", "दिल्ली", "a:b:c", "NOT", "OR OR", "*", "dog\ncat"} {
		f.Add(s)
	}
	db := openFuzzDB(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, text string) {
		got, err := db.Search(ctx, Query{Text: text, IncludeSuperseded: true})
		if err != nil {
			t.Fatalf("Search(%q): %v", text, err)
		}
		words, err := db.Search(ctx, Query{Text: strings.Join(queryTokens(text), " "), IncludeSuperseded: true})
		if err != nil {
			t.Fatalf("Search(words of %q): %v", text, err)
		}
		if !slices.Equal(ids(got), ids(words)) {
			t.Fatalf("Search(%q) = %v, but its words find %v", text, ids(got), ids(words))
		}
	})
}

func openFuzzDB(f *testing.F) *DB {
	db, err := Open(context.Background(), f.TempDir()+"/fuzz.sqlite", "main")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	for i, c := range []string{"the dog luna", "cat and dog", "near the content", "tags: x y", "NOT OR AND", "l'été à Paris", "दिल्ली"} {
		if _, err := db.Put(context.Background(), NewEntry{Type: TypeFact, Content: c, Tags: []string{"t" + string(rune('a'+i))},
			Session: "s", Group: "main", Time: t0}); err != nil {
			f.Fatal(err)
		}
	}
	return db
}
