namespace TodoApi;

public sealed record Todo(int Id, string Title, bool Done);

public sealed record NewTodo(string? Title);

// In memory, shared by every request: the application holds it as a singleton.
public sealed class TodoStore
{
    private readonly object _gate = new();
    private readonly List<Todo> _todos =
    [
        new(1, "Write the spec", true),
        new(2, "Ship the API", false),
    ];

    public IReadOnlyList<Todo> All()
    {
        lock (_gate)
        {
            return _todos.ToList();
        }
    }

    public Todo? Find(int id)
    {
        lock (_gate)
        {
            return _todos.FirstOrDefault(t => t.Id == id);
        }
    }

    public Todo Add(string title)
    {
        lock (_gate)
        {
            var todo = new Todo(_todos.Count == 0 ? 1 : _todos.Max(t => t.Id) + 1, title.Trim(), false);
            _todos.Add(todo);
            return todo;
        }
    }
}
