package coord

import "go.uber.org/zap"

// quietZap keeps the etcd client's own logging out of the broker's log:
// the session reports every failure that matters itself.
func quietZap() *zap.Logger { return zap.NewNop() }
