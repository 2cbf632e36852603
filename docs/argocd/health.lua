-- Argo CD health check for the audittrail.dev kinds, the same script for both
-- (resource.customizations.health.audittrail.dev_ApiKey and ..._WebhookEndpoint). It reads the kstatus
-- conditions the controller writes:
--   Progressing  no status yet, a generation not yet observed, or Reconciling=True (retrying after an error)
--   Degraded     Stalled=True: a refused spec, a Secret name taken by someone else, a deleted Secret, an
--                endpoint disabled after failures, a key revoked outside Kubernetes (the message says what to do)
--   Suspended    Ready=True for a state chosen on purpose: a key revoked (spec.revoked), an endpoint
--                disabled (spec.disabled)
--   Healthy      Ready=True otherwise
local hs = { status = "Progressing", message = "Waiting for the audit-trail controller" }
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.message = "Waiting for the controller to observe generation " .. obj.metadata.generation
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Reconciling" and condition.status == "True" then
      hs.message = condition.message or condition.reason
    end
  end
  return hs
end
local ready = nil
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Stalled" and condition.status == "True" then
    return { status = "Degraded", message = condition.message or condition.reason }
  end
  if condition.type == "Reconciling" and condition.status == "True" then
    return { status = "Progressing", message = condition.message or condition.reason }
  end
  if condition.type == "Ready" then
    ready = condition
  end
end
if ready == nil then
  return hs
end
hs.message = ready.message or ready.reason
if ready.status == "True" and (ready.reason == "Revoked" or ready.reason == "Disabled") then
  hs.status = "Suspended"
elseif ready.status == "True" then
  hs.status = "Healthy"
elseif ready.status == "False" and ready.reason == "Revoked" then
  -- Written by controllers before kstatus conditions: a key revoked on purpose.
  hs.status = "Suspended"
elseif ready.status == "False" then
  hs.status = "Degraded"
end
return hs
