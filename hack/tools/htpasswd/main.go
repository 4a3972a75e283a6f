// htpasswd writes one bcrypt line `user:$2a$...` (the only hash the registry's htpasswd auth
// accepts) for the user named by the first argument and the password read from stdin, so the
// password never appears in a process listing. Node has no bcrypt; x/crypto/bcrypt is the
// implementation the registry itself verifies with.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" || strings.Contains(os.Args[1], ":") {
		fmt.Fprintln(os.Stderr, "usage: htpasswd USER < password")
		os.Exit(2)
	}
	password, err := io.ReadAll(io.LimitReader(os.Stdin, 73))
	if err != nil || len(password) == 0 || len(password) > 72 {
		fmt.Fprintln(os.Stderr, "htpasswd: want a password of 1 to 72 bytes on stdin")
		os.Exit(2)
	}
	hash, err := bcrypt.GenerateFromPassword(password, bcrypt.DefaultCost)
	if err != nil {
		fmt.Fprintln(os.Stderr, "htpasswd:", err)
		os.Exit(1)
	}
	fmt.Printf("%s:%s\n", os.Args[1], hash)
}
