package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
)

func apiFeatures(t *testing.T, c *brokertest.Conn, version int16) (supported map[string][2]int16, finalized map[string]int16, epoch int64) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = version, "kaas-test", "1"
	resp := c.RoundTrip(req).(*kmsg.ApiVersionsResponse)
	supported, finalized = map[string][2]int16{}, map[string]int16{}
	for _, f := range resp.SupportedFeatures {
		supported[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
	}
	for _, f := range resp.FinalizedFeatures {
		if f.MinVersionLevel != f.MaxVersionLevel {
			t.Errorf("finalized %s: min level %d, max %d", f.Name, f.MinVersionLevel, f.MaxVersionLevel)
		}
		finalized[f.Name] = f.MaxVersionLevel
	}
	return supported, finalized, resp.FinalizedFeaturesEpoch
}

func updateTV(c *brokertest.Conn, version, level int16, typ int8, validateOnly bool) *kmsg.UpdateFeaturesResponse {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.Version, req.ValidateOnly = version, validateOnly
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType, u.AllowDowngrade = "transaction.version", level, typ, typ != 1
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	return c.RoundTrip(req).(*kmsg.UpdateFeaturesResponse)
}

// TestFeaturesTransactionVersion: ApiVersions lists transaction.version
// (supported 0–2, finalized 2 at epoch 0 by default; v3 omits a supported
// feature whose minimum is 0), UpdateFeatures changes it with Apache's
// checks, the change raises the epoch and outlives a restart, and
// --transaction-version sets the level of a fresh broker (R-FEA-1, R-FEA-2).
func TestFeaturesTransactionVersion(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.StartIn(t, dir)
	c := brokertest.Dial(t, b.Addr())
	sup, fin, epoch := apiFeatures(t, c, 4)
	if sup["transaction.version"] != [2]int16{0, 2} || fin["transaction.version"] != 2 || epoch != 0 {
		t.Fatalf("ApiVersions v4: supported %v, finalized %v at epoch %d; want 0-2, 2, 0", sup, fin, epoch)
	}
	if sup, fin, _ := apiFeatures(t, c, 3); len(sup) != 0 || fin["transaction.version"] != 2 {
		t.Errorf("ApiVersions v3: supported %v (want none: minimum 0), finalized %v", sup, fin)
	}
	for _, bad := range []struct {
		name    string
		version int16
		level   int16
		typ     int8
	}{
		{"beyond the supported maximum", 2, 3, 1},
		{"a downgrade typed as an upgrade", 2, 1, 1},
		{"a v0 downgrade without AllowDowngrade", 0, 1, 1},
	} {
		resp := updateTV(c, bad.version, bad.level, bad.typ, false)
		if resp.ErrorCode != kerr.InvalidUpdateVersion.Code || resp.ErrorMessage == nil {
			t.Errorf("%s: error %d (%v), want INVALID_UPDATE_VERSION with a message", bad.name, resp.ErrorCode, resp.ErrorMessage)
		}
		if bad.version <= 1 && (len(resp.Results) != 1 || resp.Results[0].ErrorCode != kerr.InvalidUpdateVersion.Code) {
			t.Errorf("%s: v%d results %+v", bad.name, bad.version, resp.Results)
		}
	}
	if resp := updateTV(c, 2, 1, 2, true); resp.ErrorCode != 0 {
		t.Fatalf("validate-only downgrade: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if _, fin, epoch := apiFeatures(t, c, 4); fin["transaction.version"] != 2 || epoch != 0 {
		t.Fatalf("after a validate-only update: finalized %v at epoch %d", fin, epoch)
	}
	if resp := updateTV(c, 1, 1, 2, false); resp.ErrorCode != 0 || len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("safe downgrade to 1 (v1): %+v", resp)
	}
	if _, fin, epoch := apiFeatures(t, c, 4); fin["transaction.version"] != 1 || epoch != 1 {
		t.Fatalf("after the downgrade: finalized %v at epoch %d, want 1 at 1", fin, epoch)
	}
	brokertest.Stop(t, b)
	b = brokertest.StartIn(t, dir)
	c = brokertest.Dial(t, b.Addr())
	if _, fin, epoch := apiFeatures(t, c, 4); fin["transaction.version"] != 1 || epoch != 1 {
		t.Fatalf("after a restart: finalized %v at epoch %d, want 1 at 1", fin, epoch)
	}
	if resp := updateTV(c, 2, 0, 3, false); resp.ErrorCode != 0 {
		t.Fatalf("unsafe downgrade to 0: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if _, fin, epoch := apiFeatures(t, c, 4); len(fin) != 0 || epoch != 2 {
		t.Fatalf("at level 0: finalized %v at epoch %d, want none listed at 2", fin, epoch)
	}
	if resp := updateTV(c, 2, 2, 1, false); resp.ErrorCode != 0 {
		t.Fatalf("upgrade to 2: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	fresh := brokertest.Start(t, brokertest.WithConfig(func(cfg *broker.Config) { cfg.TransactionVersion = 1 }))
	if _, fin, _ := apiFeatures(t, brokertest.Dial(t, fresh.Addr()), 4); fin["transaction.version"] != 1 {
		t.Fatalf("--transaction-version 1: finalized %v", fin)
	}
}
