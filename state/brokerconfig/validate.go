package brokerconfig

import (
	"fmt"
	"sort"
	"strings"

	"kaas/state/topics"
)

// ValidateDynamic checks a dynamic broker config layer as Apache's
// DynamicBrokerConfig.validate does before accepting it: every name must
// be a dynamic config, every value valid for it. Apache answers these
// failures with INVALID_REQUEST (KAFKA-13609); so does kaas. Unlike
// Apache, kaas also refuses names it does not know rather than storing
// them unused.
func ValidateDynamic(values map[string]string) error {
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	var unknown, readOnly []string
	for _, n := range names {
		s, ok := Specs[n]
		switch {
		case !ok:
			unknown = append(unknown, n)
		case !s.Dynamic:
			readOnly = append(readOnly, n)
		}
	}
	if len(readOnly) > 0 {
		return fmt.Errorf("Cannot update these configs dynamically: Set(%s)", strings.Join(readOnly, ", "))
	}
	if len(unknown) > 0 {
		return fmt.Errorf("Unknown broker configs (kaas does not have them): %s", strings.Join(unknown, ", "))
	}
	for _, n := range names {
		s := Specs[n]
		validate := s.Validate
		if s.Topic != "" {
			validate = topics.Specs[s.Topic].Validate
		}
		if err := validate(values[n]); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: %w", values[n], n, err)
		}
		if n == "log.cleaner.threads" && strings.TrimSpace(values[n]) == "0" {
			// LogCleaner.validateReconfiguration.
			return fmt.Errorf("Log cleaner threads should be at least 1")
		}
	}
	return nil
}
