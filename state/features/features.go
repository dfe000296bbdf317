// Package features is the broker's feature table (KIP-584): the features
// kaas supports, with their version ranges and defaults, and the rule an
// UpdateFeatures request is checked against (spec features.md, R-FEA-*).
// It does no I/O: the broker stores the finalized levels and asks here
// whether a change may be made.
package features

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TransactionVersion is KIP-890's feature: 0 and 1 are the classic
// transaction protocol (1 adds only the new error codes), 2 bumps the
// producer epoch at every EndTxn and adds partitions implicitly on
// Produce v12 and TxnOffsetCommit v5 (R-FEA-1).
const TransactionVersion = "transaction.version"

// Feature is one supported feature and the levels it may be finalized at.
type Feature struct {
	Name     string
	Min, Max int16
	Default  int16
}

// Supported is every feature kaas supports, in the order ApiVersions lists
// them.
var Supported = []Feature{
	{Name: TransactionVersion, Min: 0, Max: 2, Default: 2},
}

// Lookup returns the supported feature name.
func Lookup(name string) (Feature, bool) {
	for _, f := range Supported {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// UpgradeType is UpdateFeatures' upgrade type (v1+; v0's AllowDowngrade
// maps false to Upgrade and true to SafeDowngrade).
type UpgradeType int8

const (
	Upgrade         UpgradeType = 1
	SafeDowngrade   UpgradeType = 2
	UnsafeDowngrade UpgradeType = 3
)

// Update is one feature change asked for.
type Update struct {
	Name  string
	Level int16 // below 1: delete, i.e. level 0
	Type  UpgradeType
}

// Check is R-FEA-2: whether u may be applied to a feature finalized at
// current, with openTV2 transactions of transaction version 2 open
// (Ongoing or Prepare*) on this broker. It returns 0, or
// INVALID_UPDATE_VERSION and why.
func Check(u Update, current int16, openTV2 int) (int16, string) {
	f, ok := Lookup(u.Name)
	if !ok {
		return kerr.InvalidUpdateVersion.Code, fmt.Sprintf("the broker does not support the feature %q", u.Name)
	}
	level := max(u.Level, 0)
	switch {
	case level < f.Min || level > f.Max:
		return kerr.InvalidUpdateVersion.Code, fmt.Sprintf("invalid update version %d for feature %s: supported versions are %d-%d", level, f.Name, f.Min, f.Max)
	case level < current && u.Type == Upgrade:
		return kerr.InvalidUpdateVersion.Code, fmt.Sprintf("cannot downgrade %s from %d to %d without setting the upgrade type to safe or unsafe downgrade", f.Name, current, level)
	case level > current && u.Type != Upgrade:
		return kerr.InvalidUpdateVersion.Code, fmt.Sprintf("cannot upgrade %s from %d to %d with a downgrade upgrade type", f.Name, current, level)
	case f.Name == TransactionVersion && current >= 2 && level < 2 && openTV2 > 0:
		return kerr.InvalidUpdateVersion.Code, fmt.Sprintf("cannot downgrade %s below 2 while %d transaction(s) of transaction version 2 are open; finish them first", f.Name, openTV2)
	}
	return 0, ""
}
