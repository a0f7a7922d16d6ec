#include "contracts/job_summary.h"

namespace shardwise {

v1::JobSummary Summarize(const v1::Job& job) {
  v1::JobSummary summary;
  summary.set_id(job.id());
  summary.set_name(job.spec().name());
  summary.set_state(job.state());
  summary.set_reason(job.reason());
  summary.set_attempt(job.attempt());
  summary.set_restarts(job.restarts());
  summary.set_world_size(job.spec().world_size());
  summary.set_device(job.spec().device());
  summary.set_create_time_ms(job.create_time_ms());
  summary.set_update_time_ms(job.update_time_ms());
  summary.set_submitter(job.submitter());
  summary.set_step(job.progress().step());
  summary.set_total_steps(job.progress().total_steps());
  summary.set_loss(job.progress().loss());
  summary.set_loss_step(job.progress().loss_step());
  summary.set_compacted(job.compacted());
  summary.set_submit_request_id(job.submit_request_id());
  return summary;
}

}  // namespace shardwise
