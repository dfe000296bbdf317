package topics

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

var legalName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// MaxNameLength is Apache's limit (249).
const MaxNameLength = 249

// ValidateName applies Apache's topic name rules (Topic.validate).
func ValidateName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is illegal, it can't be empty")
	case name == "." || name == "..":
		return errors.New("topic name cannot be \".\" or \"..\"")
	case len(name) > MaxNameLength:
		return fmt.Errorf("topic name is illegal, it can't be longer than %d characters", MaxNameLength)
	case !legalName.MatchString(name):
		return fmt.Errorf("topic name %q is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
	case strings.HasPrefix(name, "__cluster"):
		return errors.New("topic names starting with __cluster are reserved")
	}
	return nil
}
