-- Neovim: geminid's own JSON-RPC API over `gemctl rpc` (newline-delimited JSON-RPC on its
-- stdin and stdout), no MCP client needed. Put this in your config and run :GeminidTools.
-- Each request below is one line; the test suite sends these same lines to a real daemon.
local M = {}

local requests = {
  [[{"jsonrpc":"2.0","id":1,"method":"daemon/hello","params":{"protocolVersion":2,"client":{"name":"neovim","version":"0.10"}}}]],
  [[{"jsonrpc":"2.0","id":2,"method":"session/create","params":{"workspace":"$CWD","reuseDefault":true}}]],
}

function M.tools()
  local cwd = vim.fn.getcwd()
  local session
  local job
  job = vim.fn.jobstart({ "gemctl", "rpc" }, {
    stdout_buffered = false,
    on_stdout = function(_, lines)
      for _, line in ipairs(lines) do
        if line ~= "" then
          local msg = vim.json.decode(line)
          if msg.id == 2 and msg.result then
            session = msg.result.id
            local list = vim.json.encode({
              jsonrpc = "2.0", id = 3, method = "tools/list", params = { session = session },
            })
            vim.fn.chansend(job, list .. "\n")
          elseif msg.id == 3 and msg.result then
            local names = {}
            for _, t in ipairs(msg.result.tools) do
              table.insert(names, t.name)
            end
            print("geminid tools: " .. table.concat(names, ", "))
            vim.fn.jobstop(job)
          end
        end
      end
    end,
  })
  for _, r in ipairs(requests) do
    vim.fn.chansend(job, (r:gsub("%$CWD", cwd)) .. "\n")
  end
end

vim.api.nvim_create_user_command("GeminidTools", M.tools, {})
return M
