//go:build !linux

package confine

import "fmt"

func runHelper(mode string) int {
	fmt.Println("no helper modes on this system:", mode)
	return 2
}
