package sanitize

import ("testing"; "fmt")

func BenchmarkZZRule(b *testing.B) {
	s := "request failed: 401 Unauthorized (Authorization: Bearer " + fake("sk-ant-api03-", 93) + ")"
	for i, r := range rules {
		b.Run(fmt.Sprintf("%d-%s", i, kindNames[r.kind]), func(b *testing.B) {
			for b.Loop() { r.find(s, nil) }
		})
	}
	b.Run("trigger", func(b *testing.B) { for b.Loop() { trigger(s) } })
	b.Run("pass", func(b *testing.B) { for b.Loop() { redactPass(s, trigger(s)) } })
}
