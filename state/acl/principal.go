package acl

import (
	"errors"
	"strings"
)

// Anonymous is the principal of a connection that did not authenticate
// (PLAINTEXT, or SSL without a client certificate), as Apache's
// KafkaPrincipal.ANONYMOUS.
const Anonymous = "User:ANONYMOUS"

// UserPrincipal is the principal string of a user name ("User:alice").
func UserPrincipal(name string) string { return "User:" + name }

// ParsePrincipal splits "Type:name" at its first colon, as Apache's
// SecurityUtils.parseKafkaPrincipal.
func ParsePrincipal(s string) (typ, name string, err error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || s == "" {
		return "", "", errors.New("Could not parse principal from `" + s + "` (no colon is present separating the principal type from the principal name)")
	}
	return typ, name, nil
}

// ParseSuperUsers reads Apache's super.users: principals separated by
// semicolons, blanks trimmed.
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, _, err := ParsePrincipal(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
