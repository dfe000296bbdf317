package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/admin"
	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 35, min: 0, max: 5, serve: serveDescribeLogDirs, fail: failDescribeLogDirs})
}

// serveDescribeLogDirs serves DescribeLogDirs (key 35), versions 0–5.
//
// One log dir, the data directory (log_dirs.go), holding the partitions
// this broker owns now (in a cluster each broker reports its own share;
// the volume is shared, ownership is not): each with its size on disk,
// offset lag 0 (the owner is the one replica) and is_future false. A null
// topic list means every partition here; named partitions not here are
// left out, as Apache's ReplicaManager.describeLogDirs leaves out logs it
// does not hold. v4+ carry the volume's total and usable bytes (statfs);
// v5's cordoned flag is false. A partition offline after a disk error is
// still listed (its log dir is not offline: kaas takes partitions, not
// directories, offline). Internal topics are coordinator slot logs, not
// partition logs, and are not listed.
//
// ACL: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED (v3+'s
// top-level code) and no results, as Apache's handleDescribeLogDirsRequest.
func serveDescribeLogDirs(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !b.sec.Access(c).Cluster(acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	asked := partitionSet(req.Topics, func(t *kmsg.DescribeLogDirsRequestTopic) (string, []int32) { return t.Topic, t.Partitions })
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.logDir()
	if total, free := admin.FSSpace(dir.Dir); total > 0 {
		dir.TotalBytes, dir.UsableBytes = int64(total), int64(free)
	}
	for _, t := range sortedTopics(b.topics.load()) {
		var out *kmsg.DescribeLogDirsResponseDirTopic
		for p, h := range t.parts {
			if h == nil || (asked != nil && !asked[t.meta.Name][int32(p)]) {
				continue
			}
			if out == nil {
				dir.Topics = append(dir.Topics, kmsg.NewDescribeLogDirsResponseDirTopic())
				out = &dir.Topics[len(dir.Topics)-1]
				out.Topic = t.meta.Name
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = int32(p), h.View().Size
			out.Partitions = append(out.Partitions, dp)
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp
}

func failDescribeLogDirs(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.ErrorCode = code
	return resp
}
