-- Argo CD health check for audittrail.dev/ApiKey (resource.customizations.health.audittrail.dev_ApiKey).
-- Healthy once the controller reports the key Active for the current generation; a key revoked on
-- purpose (spec.revoked) is Suspended; a spec the controller refused is Degraded.
local hs = { status = "Progressing", message = "Waiting for the audit-trail controller" }
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.message = "Waiting for the controller to observe generation " .. obj.metadata.generation
  return hs
end
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Ready" then
    if condition.status == "True" then
      hs.status = "Healthy"
    elseif condition.reason == "Revoked" then
      hs.status = "Suspended"
    elseif condition.status == "False" then
      hs.status = "Degraded"
    end
    hs.message = condition.message or condition.reason
    return hs
  end
end
return hs
