using TodoApi;

var builder = WebApplication.CreateBuilder(args);
builder.Services.AddSingleton<TodoStore>();

var app = builder.Build();

app.MapGet("/", () => Results.Content(HomePage.Html, "text/html; charset=utf-8"));
app.MapGet("/health", () => "ok");
app.MapGet("/todos", (TodoStore store) => store.All());
app.MapGet("/todos/{id:int}", (int id, TodoStore store) =>
    store.Find(id) is { } todo ? Results.Ok(todo) : Results.NotFound());
app.MapPost("/todos", (NewTodo input, TodoStore store) =>
{
    if (string.IsNullOrWhiteSpace(input.Title))
    {
        return Results.ValidationProblem(new Dictionary<string, string[]>
        {
            ["title"] = ["The title is required."],
        });
    }

    var todo = store.Add(input.Title);
    return Results.Created($"/todos/{todo.Id}", todo);
});

app.Run();

// The test project starts the application through WebApplicationFactory<Program>.
public partial class Program
{
}
