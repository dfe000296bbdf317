package broker

// UpdateFeatures (key 57), versions 0–2 (KIP-584; spec features.md).
//
// Changes the finalized level of supported features (transaction.version
// alone today, state/features). Each update is checked (R-FEA-2): an
// unknown feature, a level outside the supported range, a downgrade
// without a downgrade upgrade type (v0: AllowDowngrade), an upgrade with
// one → INVALID_UPDATE_VERSION; transaction.version cannot go below 2
// while transactions of transaction version 2 this broker coordinates are
// open. A feature named twice is INVALID_REQUEST. All or nothing, as
// Apache's controller: any failure applies none, and the top-level error
// is the first one (v0–1 also carry a result per feature; v2 the
// top-level error alone). ValidateOnly (v1+) checks and changes nothing.
// A change is durable (the config store; etcd in a cluster, every broker
// applying it from its watch) before the answer, and raises the
// finalized features epoch ApiVersions reports. Blocking: it writes.
//
// With --authorizer: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/features"
)

func init() {
	register(api{key: 57, min: 0, max: 2, blocking: true, serve: serveUpdateFeatures, fail: failUpdateFeatures})
}

func serveUpdateFeatures(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.UpdateFeaturesRequest)
	if !b.access(c).cluster(acl.Alter) {
		return failUpdateFeatures(req, kerr.ClusterAuthorizationFailed.Code)
	}
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	current := b.finalizedFeatures()
	levels := map[string]int16{}
	codes := make([]int16, len(req.FeatureUpdates))
	msgs := make([]string, len(req.FeatureUpdates))
	first := -1
	for i, fu := range req.FeatureUpdates {
		typ := features.UpgradeType(fu.UpgradeType)
		if req.Version == 0 {
			typ = features.Upgrade
			if fu.AllowDowngrade {
				typ = features.SafeDowngrade
			}
		}
		if _, dup := levels[fu.Feature]; dup {
			codes[i], msgs[i] = kerr.InvalidRequest.Code, "the feature "+fu.Feature+" is named more than once"
		} else {
			open := 0
			if fu.Feature == features.TransactionVersion {
				open = b.openTV2Transactions()
			}
			codes[i], msgs[i] = features.Check(features.Update{Name: fu.Feature, Level: fu.MaxVersionLevel, Type: typ}, current.levels[fu.Feature], open)
		}
		levels[fu.Feature] = max(fu.MaxVersionLevel, 0)
		if codes[i] != 0 && first < 0 {
			first = i
		}
	}
	if first >= 0 {
		b.log.Info("feature update refused", "client", c.ClientID, "feature", req.FeatureUpdates[first].Feature,
			"level", req.FeatureUpdates[first].MaxVersionLevel, "reason", msgs[first])
		resp.ErrorCode, resp.ErrorMessage = codes[first], &msgs[first]
	} else if !req.ValidateOnly && len(levels) > 0 {
		if err := b.storeFeatures(levels); err != nil {
			b.log.Error("storing finalized features", "err", err)
			return failUpdateFeatures(req, kerr.UnknownServerError.Code)
		}
		b.log.Info("finalized features updated", "client", c.ClientID, "levels", levels, "epoch", b.finalizedFeatures().epoch)
	}
	if req.Version <= 1 {
		for i, fu := range req.FeatureUpdates {
			r := kmsg.NewUpdateFeaturesResponseResult()
			r.Feature, r.ErrorCode = fu.Feature, codes[i]
			if codes[i] != 0 {
				r.ErrorMessage = &msgs[i]
			}
			resp.Results = append(resp.Results, r)
		}
	}
	return resp
}

func failUpdateFeatures(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	resp.ErrorCode = code
	if req.Version <= 1 {
		for _, fu := range req.FeatureUpdates {
			res := kmsg.NewUpdateFeaturesResponseResult()
			res.Feature, res.ErrorCode = fu.Feature, code
			resp.Results = append(resp.Results, res)
		}
	}
	return resp
}
