// SPDX-License-Identifier: Apache-2.0
package main

import (
	"fmt"
	"net"
	"os"
)

func main() {
	n := 0
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", os.Args[1])
		if err == nil {
			n++
			c.Close()
		}
	}
	fmt.Printf("go connected %d\n", n)
}
