// Package clientmetrics is KIP-714's broker side, pure and clock-injected
// (Unix ms): client-metrics subscriptions (CLIENT_METRICS config
// resources: metrics, interval.ms, match) validated as Apache's
// ClientMetricsConfigs, the client instances a broker tracks with
// Apache's push-interval enforcement (ClientMetricsManager,
// ClientMetricsInstance), and the decoding of a pushed OTLP payload into
// bounded series.
package clientmetrics

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Config names of a CLIENT_METRICS resource, and their bounds.
const (
	ConfigMetrics  = "metrics"
	ConfigInterval = "interval.ms"
	ConfigMatch    = "match"

	// AllMetrics subscribes to every metric.
	AllMetrics = "*"

	DefaultIntervalMs = 5 * 60 * 1000
	minIntervalMs     = 100
	maxIntervalMs     = 3600000
)

// ConfigNames lists the configs in DescribeConfigs order.
var ConfigNames = []string{ConfigInterval, ConfigMatch, ConfigMetrics}

// Match selectors a subscription's match patterns may name.
const (
	MatchInstanceID      = "client_instance_id"
	MatchClientID        = "client_id"
	MatchSoftwareName    = "client_software_name"
	MatchSoftwareVersion = "client_software_version"
	MatchSourceAddress   = "client_source_address"
	MatchSourcePort      = "client_source_port"
)

var matchParams = map[string]bool{MatchInstanceID: true, MatchClientID: true, MatchSoftwareName: true,
	MatchSoftwareVersion: true, MatchSourceAddress: true, MatchSourcePort: true}

// Subscription is one CLIENT_METRICS resource.
type Subscription struct {
	Name       string
	Metrics    []string
	IntervalMs int
	Match      map[string]*regexp.Regexp
}

// Error is a rejected subscription: Apache's INVALID_REQUEST, or
// INVALID_CONFIG (Config) for a value that does not parse.
type Error struct {
	Config bool
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Parse validates a subscription's configs as Apache's
// ClientMetricsConfigs.validate and builds it.
func Parse(name string, configs map[string]string) (Subscription, error) {
	if name == "" {
		return Subscription{}, &Error{Msg: "Subscription name can't be empty"}
	}
	for _, k := range sortedKeys(configs) {
		if k != ConfigMetrics && k != ConfigInterval && k != ConfigMatch {
			return Subscription{}, &Error{Msg: "Unknown client metrics configuration: " + k}
		}
	}
	s := Subscription{Name: name, IntervalMs: DefaultIntervalMs, Metrics: splitList(configs[ConfigMetrics])}
	if v, ok := configs[ConfigInterval]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return Subscription{}, &Error{Config: true, Msg: fmt.Sprintf("Invalid value %s for configuration %s: Not a number of type INT", v, ConfigInterval)}
		}
		if n < minIntervalMs || n > maxIntervalMs {
			return Subscription{}, &Error{Msg: fmt.Sprintf("Invalid value %d for %s, interval must be between 100 and 3600000 (1 hour)", n, ConfigInterval)}
		}
		s.IntervalMs = int(n)
	}
	s.Match = map[string]*regexp.Regexp{}
	for _, p := range splitList(configs[ConfigMatch]) {
		parts := strings.Split(p, "=")
		if len(parts) != 2 || !matchParams[strings.TrimSpace(parts[0])] {
			return Subscription{}, &Error{Config: true, Msg: "Illegal client matching pattern: " + p}
		}
		// Java's Pattern.matcher(...).matches(): the whole value.
		re, err := regexp.Compile("^(?:" + strings.TrimSpace(parts[1]) + ")$")
		if err != nil {
			return Subscription{}, &Error{Config: true, Msg: "Illegal client matching pattern: " + p}
		}
		s.Match[strings.TrimSpace(parts[0])] = re
	}
	return s, nil
}

// splitList is Apache's LIST parsing: comma separated, trimmed, empty
// items dropped.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Client is what a subscription's match patterns are matched against
// (ClientMetricsInstanceMetadata).
type Client struct {
	InstanceID      string
	ClientID        string
	SoftwareName    string
	SoftwareVersion string
	SourceAddress   string
	SourcePort      string
}

func (c Client) value(param string) string {
	switch param {
	case MatchInstanceID:
		return c.InstanceID
	case MatchClientID:
		return c.ClientID
	case MatchSoftwareName:
		return c.SoftwareName
	case MatchSoftwareVersion:
		return c.SoftwareVersion
	case MatchSourceAddress:
		return c.SourceAddress
	}
	return c.SourcePort
}

// Matches reports whether every pattern of s matches c (no pattern: all
// clients).
func (s Subscription) Matches(c Client) bool {
	for param, re := range s.Match {
		if !re.MatchString(c.value(param)) {
			return false
		}
	}
	return true
}
